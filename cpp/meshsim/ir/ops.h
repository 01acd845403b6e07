// Ops: one function per primitive application, for C++ code that builds
// computations (autodiff rules, transforms). Each binds its primitive, so it
// runs at once on arrays and records an equation while a trace is open.
// Like lax, operands of elementwise ops must already agree in shape and dtype.
#pragma once
#include <optional>

#include "meshsim/ir/trace.h"

namespace meshsim::ops {

// Any primitive by name, with one output.
Value bind1(const std::string& prim, const Values& in, const Params& params = {});

// Elementwise.
Value neg(const Value& x);
Value exp(const Value& x);
Value log(const Value& x);
Value sin(const Value& x);
Value cos(const Value& x);
Value sinh(const Value& x);
Value cosh(const Value& x);
Value sqrt(const Value& x);
Value rsqrt(const Value& x);
Value sign(const Value& x);
Value square(const Value& x);
Value floor(const Value& x);
Value abs(const Value& x);
Value integer_pow(const Value& x, int64_t y);
Value add(const Value& x, const Value& y);
Value add_any(const Value& x, const Value& y);  // cotangent accumulation
Value sub(const Value& x, const Value& y);
Value mul(const Value& x, const Value& y);
Value div(const Value& x, const Value& y);
Value pow(const Value& x, const Value& y);
Value max(const Value& x, const Value& y);
Value min(const Value& x, const Value& y);
Value eq(const Value& x, const Value& y);
Value ne(const Value& x, const Value& y);
Value lt(const Value& x, const Value& y);
Value le(const Value& x, const Value& y);
Value gt(const Value& x, const Value& y);
Value ge(const Value& x, const Value& y);
Value logical_and(const Value& x, const Value& y);
Value select_n(const Value& which, const Values& cases);
Value select(const Value& pred, const Value& on_true, const Value& on_false);
Value convert(const Value& x, DType dtype, bool weak_type = false);
// `x` with the dtype and weak type of `aval` (no equation if they already agree).
Value cast_like(const Value& x, const Aval& aval);
// `x` laid out as `aval`'s Explicit sharding (no equation if its type already is): a cotangent
// takes its primal's sharding, as in JAX.
Value reshard_like(const Value& x, const Aval& aval);

// Constants: `value` broadcast to a shape (zero-copy).
Value full(const Shape& shape, DType dtype, double value, bool weak_type = false);
Value full_like(const Value& x, double value);
Value zeros(const Aval& aval);  // with aval's VMA inside shard_map, its sharding outside
Value zeros_like(const Value& x);
Value iota(DType dtype, const Shape& shape, int64_t dimension);
Value instantiate(const Cotangent& ct, const Aval& aval);  // a symbolic zero made real

// Structural.
Value broadcast_in_dim(const Value& x, const Shape& shape, const IntList& dims);
Value reshape(const Value& x, const Shape& shape);
Value transpose(const Value& x, const IntList& perm);
Value squeeze(const Value& x, const IntList& dims);
Value rev(const Value& x, const IntList& dims);
Value slice(const Value& x, const IntList& start, const IntList& limit, const IntList& strides);
Value slice_in_dim(const Value& x, int64_t start, int64_t limit, int64_t axis);
Value pad(const Value& x, const Value& padding_value, const IntLists& config);
Value concatenate(const Values& xs, int64_t dim);

// Reductions and scans.
Value reduce_sum(const Value& x, const IntList& axes);
Value cumsum(const Value& x, int64_t axis, bool reverse);
Value cumprod(const Value& x, int64_t axis, bool reverse);
// Sums `x` (of a broadcast result's shape) back to `shape`, the inverse of
// broadcast_in_dim(·, x.shape, dims): cotangents of broadcasts.
Value sum_to_operand(const Value& x, const Shape& shape, const IntList& dims);

// Products and indexing.
Value dot_general(const Value& x, const Value& y, const IntLists& dimension_numbers,
                  std::optional<DType> preferred_element_type = std::nullopt,
                  std::optional<Spec> out_sharding = std::nullopt);
Value dynamic_slice(const Value& x, const Values& starts, const Shape& sizes);
Value dynamic_update_slice(const Value& x, const Value& update, const Values& starts);
Value gather(const Value& x, const Values& indices, const IntList& axes, int64_t index_dims_at,
             const std::string& mode, std::optional<double> fill_value = std::nullopt,
             const IntList& batch_axes = {});
Value scatter(const std::string& kind, const Value& x, const Value& updates, const Values& indices,
              const IntList& axes, int64_t index_dims_at, const std::string& mode,
              const IntList& batch_axes = {});
Values sort(const Values& operands, int64_t dimension, int64_t num_keys);

}  // namespace meshsim::ops
