// Partial evaluation: splitting a program by which of its inputs are known.
//
// An equation is known when all its inputs are (constants included) and it
// has results (an equation for its effects alone always stays); one with
// some inputs known is split by its primitive's rule when it has one (a
// scan: its known iterations' work and the rest), else staged whole. The known
// program computes every known value the rest needs; the staged program
// computes the rest from those "residuals" and the unknown inputs. A loop
// uses it to hoist what depends only on its loop-invariant operands out of
// the loop (JAX's partial_eval_jaxpr_nounits and scan's known hoisting).
#pragma once
#include <functional>
#include <optional>
#include <string>
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

// How an equation whose inputs are partly known splits into a known part and a
// staged part (a loop: the iterations' known work in one loop, the rest in
// another), instead of being staged whole.
struct EquationSplit {
  std::vector<bool> out_known;   // per output of the equation
  std::vector<bool> staged_reads;  // per known input: the staged part reads it
  Avals residual_avals;          // what the known part passes on to the staged part
  // The known inputs' values -> (the known outputs, the residuals).
  std::function<Values(const Values& known_in)> known;
  // (the residuals, the staged part's inputs: unknown ones and the known ones
  // it reads, in operand order) -> the unknown outputs.
  std::function<Values(const Values& residuals, const Values& inputs)> staged;
};
// A primitive's rule, declared where the primitive is registered: the split of
// equation `e` (operands typed `in`) by which operands are known, or nullopt
// to stage it whole.
using PartialEvalRule =
    std::function<std::optional<EquationSplit>(const Equation& e, const Avals& in, const std::vector<bool>& known_in)>;
void register_partial_eval_rule(const std::string& primitive, PartialEvalRule rule);

// The rule of a primitive that runs the program in its param `param` on its
// operands (jit, remat2): the program split, its known part run on the known
// operands (inlined when `inline_known`, as JAX's remat rule does; else a
// call of the primitive, as JAX's jit rule makes), the rest a call of the
// primitive on the residuals and the unknown operands.
PartialEvalRule call_partial_eval_rule(const std::string& param, bool inline_known);

}  // namespace meshsim
