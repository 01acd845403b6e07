// What XLA's CPU compiler changes in a jitted program before running it, where
// the change shows in the bits of the results. The printed program (jaxpr)
// stays as traced; the executors run the rewritten copy:
//  - float16/float32/float64 products and sums with constants are regrouped
//    so that the constants fold, as XLA's algebraic simplifier regroups them
//    ((A * C1) * C2 => A * (C1 * C2), (A * C) * broadcast(B) =>
//    A * broadcast(B * C), (A + C1) + C2 => A + (C1 + C2)), and quotients by
//    a constant or a broadcast are products by its reciprocal (`Regrouping`
//    in the .cpp);
//  - each primitive declares how XLA's algebraic simplifier compiles its
//    equations (`xla_rewrite`, ir/primitive.h) where it is registered, and
//    this pass offers it every equation: convert_element_type reads a
//    bfloat16 elementwise result converted to float32 right away before its
//    rounding (XLA computes bfloat16 ops in float32 and drops the round trip;
//    float16 keeps the rounding); div by a complex constant multiplies by the
//    constant's reciprocal (A / const => A * (1 / const));
//  - a float32/float64 product read only by an add or sub is computed with
//    it as one fused multiply-add (LLVM contracts them in XLA's fused loops;
//    the rule is `Contraction` in the .cpp).
#pragma once
#include <optional>
#include <vector>

#include "meshsim/ir/program.h"

namespace meshsim {

// One equation of a traced program, as offered to its primitive's `xla_rewrite`.
struct XlaRewriteSite {
  const Program& traced;
  const Equation& eqn;
  // Per variable of `traced`: the equation computing it, -1 for inputs and constants.
  const std::vector<int>& producers;
  // The program as XLA compiles it, holding the equations before `eqn`; null
  // when the rule is only asked whether it applies.
  Program* compiled;
};

// Where `var` is among `p`'s constants, or -1.
int const_index(const Program& p, int var);

// The program as XLA runs it, or nullopt when no rewrite applies.
std::optional<Program> as_xla_compiles(const Program& program);

// A control-flow sub-program as XLA compiles it: a loop's body or condition,
// a branch. XLA fuses and contracts within those computations as within the
// top-level one, and compiles a control-flow primitive called eagerly too,
// so their kernels run this copy (calls inlined, then as_xla_compiles),
// worked out once per program (runtime/interpreter.cpp); `traced` itself
// when nothing changes. shard_map bodies of jitted programs, which XLA also
// contracts, still run as traced.
ProgramPtr as_xla_compiles_within(const ProgramPtr& traced);

// A reshape of a reshape's result reshapes the first one's operand instead,
// and reshapes left unread are dropped, as StableHLO's canonicalisation folds
// them before XLA partitions a program: a merge of dims and a split back is no
// reshape of layouts at all then. Only folds whose reshape splits or merges
// dims (no dim regrouped into others: propagation has no rule for those).
// Values are unchanged (a reshape moves no element), so every executor runs
// it; nullopt when nothing folds.
std::optional<Program> with_reshapes_folded(const Program& program);

}  // namespace meshsim
