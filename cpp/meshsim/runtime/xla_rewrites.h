// What XLA's CPU compiler changes in a jitted program before running it, where
// the change shows in the bits of the results. The printed program (jaxpr)
// stays as traced; the executors run the rewritten copy.
//  - A bfloat16 elementwise result converted to float32 right away
//    (`convert_element_type[new_dtype=float32]` of it) is read before its
//    rounding: XLA computes bfloat16 ops in float32 and drops the
//    float32 -> bfloat16 -> float32 round trip. Its other readers still see
//    the rounded value. (float16 keeps the rounding: it is not widened so.)
//  - A complex quotient by a constant multiplies by the constant's reciprocal
//    (XLA's algebraic simplifier: A / const => A * (1 / const)); a divisor
//    passed in at run time divides.
//  - A float32/float64 product read only by an add or sub is computed with
//    it as one fused multiply-add (LLVM contracts them in XLA's fused loops;
//    the rule is `Contraction` in the .cpp).
#pragma once
#include <optional>

#include "meshsim/ir/program.h"

namespace meshsim {

// The program as XLA runs it, or nullopt when no rewrite applies.
std::optional<Program> as_xla_compiles(const Program& program);

// A reshape of a reshape's result reshapes the first one's operand instead,
// and reshapes left unread are dropped, as StableHLO's canonicalisation folds
// them before XLA partitions a program: a merge of dims and a split back is no
// reshape of layouts at all then. Only folds whose reshape splits or merges
// dims (no dim regrouped into others: propagation has no rule for those).
// Values are unchanged (a reshape moves no element), so every executor runs
// it; nullopt when nothing folds.
std::optional<Program> with_reshapes_folded(const Program& program);

}  // namespace meshsim
