// dot_general's dimension numbers, type rule and kernel (linalg.cpp), shared
// with ragged_dot_general (ragged_dot.cpp), which runs its groups as plain
// dot_generals through the same BLAS path.
#pragma once
#include <cstdint>

#include "meshsim/ir/primitive.h"

namespace meshsim::dot_parts {

// Params: dimension_numbers = (lhs_contract, rhs_contract, lhs_batch, rhs_batch),
// JAX's ((lc, rc), (lb, rb)) flattened; the free dims are the others, in order.
struct DotDims {
  IntList lhs_contract, rhs_contract, lhs_batch, rhs_batch;
  IntList lhs_free, rhs_free;
};

// The dims of an `ndim`-dimensional operand in neither `a` nor `b`, in order.
IntList free_dims(int64_t ndim, const IntList& a, const IntList& b);
bool distinct(const IntList& a);
// shape[d] for each d of `dims`.
Shape sizes(const Shape& shape, const IntList& dims);
// The more precise of two dtypes, as dot_general's operands are promoted.
DType higher_precision(DType a, DType b);
Avals dot_general_eval(const Avals& in, const Params& params);
// The dtype a product is computed in before it is cast to `out_dt`.
DType dot_compute_dtype(DType in_dt, DType out_dt);
Tensors dot_general_kernel(const Tensors& in, const Params& params, const Avals& out);
// start, start + 1, ..., n values.
IntList range_of(int64_t start, size_t n);
// The permutation sorting `v` (stable).
IntList argsort(const IntList& v);

}  // namespace meshsim::dot_parts

namespace meshsim {
void register_ragged_dot_primitive();  // ragged_dot.cpp, called by register_linalg_primitives
}  // namespace meshsim
