// Partial evaluation: splitting a program by which of its inputs are known.
//
// An equation is known when all its inputs are (constants included) and it
// has results (an equation for its effects alone always stays). The known
// program computes every known value the rest needs; the staged program
// computes the rest from those "residuals" and the unknown inputs. A loop
// uses it to hoist what depends only on its loop-invariant operands out of
// the loop (JAX's partial_eval_jaxpr_nounits and scan's known hoisting).
#pragma once
#include <vector>

#include "meshsim/ir/program.h"

namespace meshsim {

struct PartialEvalPrograms {
  // known inputs -> (outputs that are known and not instantiated, residuals)
  ProgramPtr known;
  // (residuals, unknown inputs) -> the other outputs
  ProgramPtr staged;
  std::vector<bool> out_known;  // output j is one of `known`'s
  int num_residuals = 0;
};

// `known_in[i]`: input i is known. `instantiate[j]`: output j is computed by
// the staged program even when it is known (it then passes a residual on).
PartialEvalPrograms partial_eval(const Program& program, const std::vector<bool>& known_in,
                                 const std::vector<bool>& instantiate);

}  // namespace meshsim
