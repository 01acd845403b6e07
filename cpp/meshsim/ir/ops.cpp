#include "meshsim/ir/ops.h"

#include <algorithm>

#include "meshsim/ir/axis_env.h"
#include "meshsim/kernels/dispatch.h"

namespace meshsim::ops {

Value bind1(const std::string& prim, const Values& in, const Params& params) {
  return meshsim::bind(primitive(prim), in, params)[0];
}

namespace {
Value unary(const char* prim, const Value& x) { return bind1(prim, {x}); }
Value binary(const char* prim, const Value& x, const Value& y) { return bind1(prim, {x, y}); }
}  // namespace

Value neg(const Value& x) { return unary("neg", x); }
Value exp(const Value& x) { return unary("exp", x); }
Value log(const Value& x) { return unary("log", x); }
Value sin(const Value& x) { return unary("sin", x); }
Value cos(const Value& x) { return unary("cos", x); }
Value sinh(const Value& x) { return unary("sinh", x); }
Value cosh(const Value& x) { return unary("cosh", x); }
Value sqrt(const Value& x) { return unary("sqrt", x); }
Value rsqrt(const Value& x) { return unary("rsqrt", x); }
Value sign(const Value& x) { return unary("sign", x); }
Value square(const Value& x) { return unary("square", x); }
Value floor(const Value& x) { return unary("floor", x); }
Value abs(const Value& x) { return unary("abs", x); }
Value integer_pow(const Value& x, int64_t y) { return bind1("integer_pow", {x}, {{"y", y}}); }

Value add(const Value& x, const Value& y) { return binary("add", x, y); }
Value add_any(const Value& x, const Value& y) { return binary("add_any", x, y); }
Value sub(const Value& x, const Value& y) { return binary("sub", x, y); }
Value mul(const Value& x, const Value& y) { return binary("mul", x, y); }
Value div(const Value& x, const Value& y) { return binary("div", x, y); }
Value pow(const Value& x, const Value& y) { return binary("pow", x, y); }
Value max(const Value& x, const Value& y) { return binary("max", x, y); }
Value min(const Value& x, const Value& y) { return binary("min", x, y); }
Value eq(const Value& x, const Value& y) { return binary("eq", x, y); }
Value ne(const Value& x, const Value& y) { return binary("ne", x, y); }
Value lt(const Value& x, const Value& y) { return binary("lt", x, y); }
Value le(const Value& x, const Value& y) { return binary("le", x, y); }
Value gt(const Value& x, const Value& y) { return binary("gt", x, y); }
Value ge(const Value& x, const Value& y) { return binary("ge", x, y); }
Value logical_and(const Value& x, const Value& y) { return binary("and", x, y); }

Value select_n(const Value& which, const Values& cases) {
  Values in{which};
  in.insert(in.end(), cases.begin(), cases.end());
  return bind1("select_n", in);
}

Value select(const Value& pred, const Value& on_true, const Value& on_false) {
  return select_n(pred, {on_false, on_true});
}

Value convert(const Value& x, DType dtype, bool weak_type) {
  return bind1("convert_element_type", {x}, {{"new_dtype", dtype}, {"weak_type", weak_type}});
}

Value cast_like(const Value& x, const Aval& aval) {
  const Aval& a = aval_of(x);
  if (a.dtype == aval.dtype && a.weak_type == aval.weak_type) return x;
  return convert(x, aval.dtype, aval.weak_type);
}

Value reshard_like(const Value& x, const Aval& aval) {
  const Aval a = aval_of(x);
  const MeshPtr& mesh = aval.mesh;
  // Inside a shard_map body blocks keep the types the body gave them. A value
  // typed without a mesh (a plain array a shard_map split) constrains nothing:
  // its cotangent keeps the layout the computation gave it.
  if (!mesh || current_axis_env() || a.shape != aval.shape) return x;
  auto spec_of = [](const Aval& t) {
    Spec s = t.mesh ? t.spec : Spec{};
    s.resize(t.shape.size());
    return s;
  };
  const Spec want = spec_of(aval);
  if (spec_of(a) == want) return x;
  return bind1("reshard", {x}, {{"mesh", mesh}, {"spec", std::vector<StrList>(want)}});
}

Value full(const Shape& shape, DType dtype, double value, bool weak_type) {
  Tensor scalar = dispatch_any_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return Tensor::scalar<T>(static_cast<T>(value));
  });
  Value v = Array::from_tensor(std::move(scalar), weak_type);
  if (shape.empty()) return v;
  return broadcast_in_dim(v, shape, {});
}

Value full_like(const Value& x, double value) {
  const Aval& a = aval_of(x);
  Value c = full(a.shape, a.dtype, value, a.weak_type);
  // Inside shard_map a constant is invariant: make it vary like `x`; outside,
  // laid out like `x` (select_n wants its operands sharded alike).
  return reshard_like(vary_over(c, a.vma), a);
}

Value zeros(const Aval& aval) {
  return reshard_like(vary_over(full(aval.shape, aval.dtype, 0.0, aval.weak_type), aval.vma), aval);
}

Value zeros_like(const Value& x) { return zeros(aval_of(x)); }

Value iota(DType dtype, const Shape& shape, int64_t dimension) {
  return bind1("iota", {}, {{"dtype", dtype}, {"shape", IntList(shape)}, {"dimension", dimension}});
}

Value instantiate(const Cotangent& ct, const Aval& aval) { return ct ? *ct : zeros(aval); }

Value broadcast_in_dim(const Value& x, const Shape& shape, const IntList& dims) {
  if (aval_of(x).shape == shape) return x;
  return bind1("broadcast_in_dim", {x}, {{"shape", IntList(shape)}, {"broadcast_dimensions", dims}});
}

Value reshape(const Value& x, const Shape& shape) {
  if (aval_of(x).shape == shape) return x;
  return bind1("reshape", {x}, {{"new_sizes", IntList(shape)}});
}

Value transpose(const Value& x, const IntList& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  return bind1("transpose", {x}, {{"permutation", perm}});
}

Value squeeze(const Value& x, const IntList& dims) {
  if (dims.empty()) return x;
  return bind1("squeeze", {x}, {{"dimensions", dims}});
}

Value rev(const Value& x, const IntList& dims) {
  if (dims.empty()) return x;
  return bind1("rev", {x}, {{"dimensions", dims}});
}

Value slice(const Value& x, const IntList& start, const IntList& limit, const IntList& strides) {
  return bind1("slice", {x}, {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}});
}

Value slice_in_dim(const Value& x, int64_t start, int64_t limit, int64_t axis) {
  const Shape& shape = aval_of(x).shape;
  IntList lo(shape.size(), 0), hi(shape), step(shape.size(), 1);
  lo[axis] = start;
  hi[axis] = limit;
  return slice(x, lo, hi, step);
}

Value pad(const Value& x, const Value& padding_value, const IntLists& config) {
  return bind1("pad", {x, padding_value}, {{"padding_config", config}});
}

Value concatenate(const Values& xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  return bind1("concatenate", xs, {{"dimension", dim}});
}

Value reduce_sum(const Value& x, const IntList& axes) {
  if (axes.empty()) return x;
  return bind1("reduce_sum", {x}, {{"axes", axes}});
}

Value cumsum(const Value& x, int64_t axis, bool reverse) {
  return bind1("cumsum", {x}, {{"axis", axis}, {"reverse", reverse}});
}

Value cumprod(const Value& x, int64_t axis, bool reverse) {
  return bind1("cumprod", {x}, {{"axis", axis}, {"reverse", reverse}});
}

Value sum_to_operand(const Value& x, const Shape& shape, const IntList& dims) {
  const Shape& out = aval_of(x).shape;
  IntList axes;
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    auto it = std::find(dims.begin(), dims.end(), d);
    const bool summed = it == dims.end() || (shape[it - dims.begin()] == 1 && out[d] != 1);
    if (summed) axes.push_back(d);
  }
  return reshape(reduce_sum(x, axes), shape);
}

Value dot_general(const Value& x, const Value& y, const IntLists& dimension_numbers,
                  std::optional<DType> preferred_element_type, std::optional<Spec> out_sharding) {
  Params params{{"dimension_numbers", dimension_numbers}, {"precision", std::monostate{}}};
  params.set("preferred_element_type", preferred_element_type ? ParamValue(*preferred_element_type)
                                                               : ParamValue(std::monostate{}));
  if (out_sharding) params.set("out_sharding", std::vector<StrList>(*out_sharding));
  return bind1("dot_general", {x, y}, params);
}

Value dynamic_slice(const Value& x, const Values& starts, const Shape& sizes) {
  Values in{x};
  in.insert(in.end(), starts.begin(), starts.end());
  return bind1("dynamic_slice", in, {{"slice_sizes", IntList(sizes)}});
}

Value dynamic_update_slice(const Value& x, const Value& update, const Values& starts) {
  Values in{x, update};
  in.insert(in.end(), starts.begin(), starts.end());
  return bind1("dynamic_update_slice", in);
}

Value gather(const Value& x, const Values& indices, const IntList& axes, int64_t index_dims_at,
             const std::string& mode, std::optional<double> fill_value, const IntList& batch_axes) {
  Values in{x};
  in.insert(in.end(), indices.begin(), indices.end());
  Params p{{"axes", axes}, {"index_dims_at", index_dims_at}, {"mode", mode},
           {"fill_value", fill_value ? ParamValue(*fill_value) : ParamValue(std::monostate{})}};
  if (!batch_axes.empty()) p.set("batch_axes", batch_axes);
  return bind1("gather", in, p);
}

Value scatter(const std::string& kind, const Value& x, const Value& updates, const Values& indices,
              const IntList& axes, int64_t index_dims_at, const std::string& mode,
              const IntList& batch_axes) {
  Values in{x, updates};
  in.insert(in.end(), indices.begin(), indices.end());
  Params p{{"axes", axes}, {"index_dims_at", index_dims_at}, {"mode", mode}};
  if (!batch_axes.empty()) p.set("batch_axes", batch_axes);
  return bind1(kind, in, p);
}

Values sort(const Values& operands, int64_t dimension, int64_t num_keys) {
  return meshsim::bind(primitive("sort"), operands,
              {{"dimension", dimension}, {"is_stable", true}, {"num_keys", num_keys}});
}

}  // namespace meshsim::ops
