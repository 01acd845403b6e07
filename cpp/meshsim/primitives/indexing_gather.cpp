// gather(operand, *indices; axes, index_dims_at, mode, fill_value): the form
// is described in indexing_common.h; here its fill values, VJP (a scatter_add),
// batching, sharding rule and kernel, registered together.
#include <cstring>
#include <limits>

#include "meshsim/ir/kernel_results.h"
#include "meshsim/ir/ops.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/indexing_common.h"
#include "meshsim/primitives/indexing_jax_form.h"

namespace meshsim::indexing {
namespace {

template <class T>
T default_fill() {
  if constexpr (std::is_same_v<T, bool>) return true;
  else if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
  else if constexpr (is_small_float_v<T>) return T(std::numeric_limits<float>::quiet_NaN());
  else if constexpr (is_complex_v<T>) {  // XLA fills with NaN + 0j
    return T(std::numeric_limits<typename T::value_type>::quiet_NaN(), 0);
  } else if constexpr (is_int4_v<T>) return T(T::kIsSigned ? T::kMin : T::kMax);
  else if constexpr (std::is_signed_v<T>) return std::numeric_limits<T>::lowest();
  else return std::numeric_limits<T>::max();
}

template <class T>
T fill_value(const Params& params) {
  if (params.is_none("fill_value")) return default_fill<T>();
  for (const auto& [name, v] : params.items())
    if (name == "fill_value")
      return std::visit([](const auto& s) -> T {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_arithmetic_v<S>) return static_cast<T>(s);
        else fail<TypeError>("gather fill_value must be a scalar");
      }, v);
  return default_fill<T>();
}

// "wrap" indices made explicit ((i mod n + n) mod n), for a scatter to read.
Values wrapped(const Values& indices, const IntList& axes, const Shape& shape) {
  Values out;
  for (size_t j = 0; j < indices.size(); ++j) {
    const Value n = ops::full_like(indices[j], static_cast<double>(shape[axes[j]]));
    out.push_back(ops::bind1("rem", {ops::add(ops::bind1("rem", {indices[j], n}), n), n}));
  }
  return out;
}

Cotangents gather_vjp(const VjpArgs& a) {
  IndexArgs ix = index_args(a, 1);
  std::string mode = a.params.get<std::string>("mode");
  if (mode == "wrap") {
    ix.indices = wrapped(ix.indices, ix.axes, aval_of(a.in[0]).shape);
    mode = "clip";
  }
  Value g = *a.ct[0];
  if (a.params.has("out_sharding") && !a.params.is_none("out_sharding")) {
    // The result (and so its cotangent) was laid out as asked, possibly sharded along index
    // dims; the scatter-add into the operand's layout takes them whole.
    g = whole(g);
    for (Value& i : ix.indices) i = whole(i);
  }
  Cotangents ct(a.in.size());
  ct[0] = ops::scatter("scatter_add", ops::zeros_like(a.in[0]), g, ix.indices, ix.axes,
                       ix.index_dims_at, mode == "fill" ? "drop" : "clip", ix.batch_axes);
  return ct;
}

Batched gather_batch(const BatchArgs& a) {
  const IntList& axes = a.params.get<IntList>("axes");
  const int64_t at = a.params.get<int64_t>("index_dims_at");
  Params params = a.params;
  Values in;
  const bool by_position = set_batch_axes(params);
  if (!any_batched(a.dims, 1) && !by_position) {
    params.set("axes", shift_axes(axes));
    params.set("index_dims_at", at + 1);
    in.push_back(batch_at(a.in[0], a.dims[0], 0, a.size));
    in.insert(in.end(), a.in.begin() + 1, a.in.end());
    return {meshsim::bind(a.prim, in, params), {0}};
  }
  if (a.dims[0] == kNotBatched && !by_position) {
    in.push_back(a.in[0]);
    for (size_t i = 1; i < a.in.size(); ++i) in.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
  } else {
    IntList new_axes = shift_axes(axes);
    new_axes.insert(new_axes.begin(), 0);
    params.set("axes", new_axes);
    in.push_back(batch_at(a.in[0], a.dims[0], 0, a.size));
    for (const Value& v : batched_indices(a, 1)) in.push_back(v);
  }
  return {meshsim::bind(a.prim, in, params), {at}};
}

// JAX's _gather_spec_computation for our form gather(operand, *indices; axes,
// index_dims_at): an indexed operand dim must be replicated (its slice is one
// element), the index arrays' dims give the result's batch dims (and must not
// be sharded: that needs collectives), the other operand dims keep their spec.
std::vector<Spec> gather_rule(const Avals& in, const Params& p, const Avals& out) {
  // `.at[idx].get(out_sharding=)`: the result is laid out as asked and the operand and
  // indices are brought to match it (index_plan).
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const Aval& x = in[0];
  const Avals indices(in.begin() + 1, in.end());
  const IntList& axes = p.get<IntList>("axes");
  const int64_t at = p.get<int64_t>("index_dims_at");
  const Spec xs = spec_of(x);
  // Batching dims (take_along_axis): operand dim d is indexed by an arange along B's dim d.
  const IntList batch = p.has("batch_axes") ? p.get<IntList>("batch_axes") : IntList{};
  auto bspec = index_batch_spec(indices);
  bool ok = bspec.has_value();
  for (int64_t a : axes)
    if (!in_list(batch, a)) ok &= xs[a].empty() || x.shape[a] == 1;
  for (size_t d = 0; ok && d < bspec->size(); ++d) {
    AxisNames& b = (*bspec)[d];
    if (in_list(batch, static_cast<int64_t>(d))) {
      if (!b.empty() && !xs[d].empty() && b != xs[d]) ok = false;
      else if (b.empty()) b = xs[d];
    } else {
      ok &= b.empty();
    }
  }
  if (!ok) {
    Spec shown = bspec ? *bspec : spec_of(indices[0]);
    Avals non_batch;
    for (size_t j = 0; j < axes.size(); ++j)
      if (!in_list(batch, axes[j])) non_batch.push_back(indices[j]);
    if (non_batch.empty()) non_batch.push_back(indices[0]);
    fail<ShardingTypeError>("Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for "
                            "the gather indexing as out sharding could not be resolved unambiguously "
                            "(or would require collectives on inputs). Got operand=", x.repr(),
                            ", indices=", jax_indices_aval(non_batch, shown).repr());
  }
  Spec rest;
  for (size_t d = 0; d < xs.size(); ++d)
    if (!in_list(axes, static_cast<int64_t>(d))) rest.push_back(xs[d]);
  Spec o(rest.begin(), rest.begin() + at);
  o.insert(o.end(), bspec->begin(), bspec->end());
  o.insert(o.end(), rest.begin() + at, rest.end());
  return {pad_spec(o, out[0].shape.size())};
}

void gather() {
  Primitive p;
  p.name = "gather";
  p.operands = at_least(1);  // the operand, then its index arrays
  p.fuses_operands = true;  // XLA fuses the operand it gathers from
  // Indices point anywhere along the indexed dims, which the rules keep whole.
  p.sharding_rule = gather_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) { return index_plan(in, p, out, false); };
  p.factors = [](const Avals& in, const Params& p, const Avals& out) { return index_factors(in, p, out, false); };
  p.batch = gather_batch;
  p.vjp = gather_vjp;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    parse_mode("gather", params, false);
    const Aval& x = in[0];
    Layout l = check_indices("gather", x, Avals(in.begin() + 1, in.end()), params);
    return Avals{like(x, result_shape(l, x.shape), x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const Tensor& x = in[0];
    Layout l = layout_of(params, in[1].shape(), x.ndim());
    auto boff = batch_offsets(x, &in[1], l, parse_mode("gather", params, false), params);
    // A partitioned gather's partial results are summed over the operand's
    // blocks: elements of other blocks are zeros, and an index out of range
    // is filled by the device holding the first blocks only.
    bool fills = true;
    for (int64_t start : block_starts(params, l.axes.size())) fills &= start == 0;
    Tensor res = Tensor::empty(x.dtype(), out[0].shape);
    dispatch_any_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = res.data<T>();
      const T fill = fill_value<T>(params);
      walk(
          x, l, boff, res, [&](int64_t a, int64_t o) { dst[o] = src[a]; },
          [&](int64_t a, int64_t o, int64_t n) { std::memcpy(dst + o, src + a, n * sizeof(T)); },
          [&](int64_t o, int64_t why) { dst[o] = why == kOutOfRange && fills ? fill : T{}; });
    });
    return as_tensors(std::move(res));
  };
  accept_jax_form(p, /*scatter=*/false);
  register_primitive(std::move(p));
}

}  // namespace

void register_gather() { gather(); }

}  // namespace meshsim::indexing
