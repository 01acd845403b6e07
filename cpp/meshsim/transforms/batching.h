// Batching (JAX's vmap): a program applied to a batch of examples at once.
//
// `batch_eval` walks a program's equations with each value's batch dimension
// (or kNotBatched). An equation none of whose inputs is batched is bound as it
// is; otherwise its primitive's `batch` rule binds the batched computation
// (written with ir/ops.h, so it runs on arrays, records into an open trace and
// is differentiable). Primitives without a rule get the elementwise family's
// rule when tagged `elementwise`, otherwise the per-example fallback: slice
// out each example, bind the primitive on it, stack the results — always
// correct, one bind per example.
//
// Like `eval_program`, it runs at once on arrays and inlines into an open
// trace; that is how vmap composes with jit, grad and itself.
#pragma once
#include "meshsim/ir/trace.h"

namespace meshsim {

// `program` applied to a batch of `size` examples: `dims[i]` is the batch
// dimension of `args[i]` (kNotBatched: the same value for every example).
Batched batch_eval(const Program& program, const Values& args, const BatchDims& dims, int64_t size);

// A program over batched values, for primitives holding sub-programs: input i
// is `program`'s input i with a leading batch dimension when `batched[i]`;
// every output carries the batch at dimension 0.
ProgramPtr batch_program(const Program& program, const std::vector<bool>& batched, int64_t size);

// The general form (JAX's batch_jaxpr_axes): input i batched at `in_dims[i]`
// (kNotBatched: not batched); output j comes out batched at 0 when
// `instantiate[j]` or when the batched computation makes it batched, and
// unbatched otherwise; `out_batched` says which.
struct BatchedProgram {
  ProgramPtr program;
  std::vector<bool> out_batched;
};
BatchedProgram batch_program(const Program& program, const BatchDims& in_dims, int64_t size,
                             const std::vector<bool>& instantiate);

// --- helpers for rules --------------------------------------------------------

// `x` with its batch dimension `dim` moved to `to`; an unbatched `x` is
// broadcast with a new dimension of `size` at `to`.
Value batch_at(const Value& x, int64_t dim, int64_t to, int64_t size);
// `axes` (of a per-example operand) as axes of the operand batched at dim 0.
IntList shift_axes(const IntList& axes, int64_t by = 1);
// Binds `a.prim` with `params` on the operands listed in `front` moved (or
// broadcast) to batch dimension 0, the others as they are; every output is
// batched at 0.
Batched bind_at_front(const BatchArgs& a, const Params& params, const std::vector<bool>& front);
Batched bind_at_front(const BatchArgs& a, const Params& params);  // every operand
// The rule of the elementwise family (operands of one shape, or scalars where
// the primitive allows them).
Batched batch_elementwise(const BatchArgs& a);
// For ops whose shape rule broadcasts size-1 dims (add, mul, comparisons, ...),
// as JAX's broadcast_batcher: operands of one shape batched alike are bound as
// they are; otherwise every batch goes to the front, an unbatched operand gets
// a size-1 batch dim there and a batched lower-rank one trailing size-1 dims,
// and the op broadcasts them.
Batched batch_broadcasting(const BatchArgs& a);
// The same for a primitive whose operands keep one shape (select_n): an
// unbatched 0-d operand is batched with the others instead of staying a scalar.
Batched batch_elementwise_of_one_shape(const BatchArgs& a);
// The fallback: one bind per example, stacked along dimension 0.
Batched batch_per_example(const BatchArgs& a);

}  // namespace meshsim
