// scatter[_add|_sub|_mul|_min|_max](operand, updates, *indices; axes,
// index_dims_at, mode): the form is described in indexing_common.h; here the
// VJPs (gathers reading back what was written), batching, sharding rule and
// the kernel template, instantiated once per combining function.
#include <cmath>
#include <functional>

#include "meshsim/ir/donated_operands.h"
#include "meshsim/ir/kernel_results.h"
#include "meshsim/ir/ops.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/indexing_common.h"
#include "meshsim/primitives/indexing_jax_form.h"

namespace meshsim::indexing {
namespace {

// The gather reading back what a scatter with these params wrote (dropped: 0).
Value gather_back(const Value& x, const IndexArgs& ix, const std::string& scatter_mode) {
  if (scatter_mode == "drop")
    return ops::gather(x, ix.indices, ix.axes, ix.index_dims_at, "fill", 0.0, ix.batch_axes);
  return ops::gather(x, ix.indices, ix.axes, ix.index_dims_at, "clip", std::nullopt, ix.batch_axes);
}

Cotangents scatter_add_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = *a.ct[0];
  if (a.wants[1]) ct[1] = gather_back(*a.ct[0], ix, a.params.get<std::string>("mode"));
  return ct;
}

// scatter_sub: the updates' cotangent is the negated read-back.
Cotangents scatter_sub_vjp(const VjpArgs& a) {
  Cotangents ct = scatter_add_vjp(a);
  if (a.wants[1]) ct[1] = ops::neg(*ct[1]);
  return ct;
}

// scatter: an update reaches the result only where it was written last. Tag
// each update with its position + 1 and scatter the tags to find out.
Cotangents scatter_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  const std::string& mode = a.params.get<std::string>("mode");
  const Value& g = *a.ct[0];
  const Shape& upd_shape = aval_of(a.in[1]).shape;
  const int64_t n = num_elements(upd_shape);
  const Value tags = ops::reshape(ops::add(ops::iota(DType::Int32, {n}, 0), ops::full({n}, DType::Int32, 1.0)),
                                  upd_shape);
  const Value written = ops::scatter("scatter", ops::full(aval_of(a.in[0]).shape, DType::Int32, 0.0), tags,
                                     ix.indices, ix.axes, ix.index_dims_at, mode, ix.batch_axes);
  Cotangents ct(a.in.size());
  if (a.wants[0])
    ct[0] = ops::select(ops::eq(written, ops::full_like(written, 0.0)), g, ops::zeros_like(g));
  if (a.wants[1]) {
    const Value won = ops::eq(gather_back(written, ix, mode), tags);
    const Value picked = gather_back(g, ix, mode);
    ct[1] = ops::select(won, picked, ops::zeros_like(picked));
  }
  return ct;
}

// scatter_mul is linear in the operand; its updates' cotangent needs unique
// indices, which the primitive does not promise (JAX refuses it too).
Cotangents scatter_mul_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  if (a.wants[1])
    fail<NotImplementedError>("scatter_mul gradients are only implemented if `unique_indices=True`");
  Cotangents ct(a.in.size());
  ct[0] = ops::scatter("scatter_mul", *a.ct[0], a.in[1], ix.indices, ix.axes, ix.index_dims_at,
                       a.params.get<std::string>("mode"), ix.batch_axes);
  return ct;
}

// scatter_min/max: g goes to whichever of the operand and the updates ended
// up in the result, shared evenly between ties (as JAX).
Cotangents scatter_extremal_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  const std::string& mode = a.params.get<std::string>("mode");
  const Value &g = *a.ct[0], &x = a.in[0], &u = a.in[1], &out = a.out[0];
  const Aval xa = aval_of(x);
  const Value landed = gather_back(ops::full_like(x, 1.0), ix, mode);  // 0 where dropped
  const Value won_u = ops::mul(ops::convert(ops::eq(u, gather_back(out, ix, mode)), xa.dtype), landed);
  const Value kept_x = ops::convert(ops::eq(x, out), xa.dtype);
  const Value count = ops::add(ops::scatter("scatter_add", ops::zeros_like(x), won_u, ix.indices, ix.axes,
                                            ix.index_dims_at, mode, ix.batch_axes), kept_x);
  const Value share = ops::div(g, ops::max(count, ops::full_like(count, 1.0)));
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = ops::mul(share, kept_x);
  if (a.wants[1]) ct[1] = ops::mul(gather_back(share, ix, mode), won_u);
  return ct;
}

Batched scatter_batch(const BatchArgs& a) {
  const IntList& axes = a.params.get<IntList>("axes");
  const int64_t at = a.params.get<int64_t>("index_dims_at");
  Params params = a.params;
  Values in{batch_at(a.in[0], a.dims[0], 0, a.size)};
  const bool by_position = set_batch_axes(params);
  if (!any_batched(a.dims, 2) && !by_position) {
    params.set("axes", shift_axes(axes));
    params.set("index_dims_at", at + 1);
    in.push_back(batch_at(a.in[1], a.dims[1], 0, a.size));
    in.insert(in.end(), a.in.begin() + 2, a.in.end());
  } else {
    IntList new_axes = shift_axes(axes);
    new_axes.insert(new_axes.begin(), 0);
    params.set("axes", new_axes);
    in.push_back(batch_at(a.in[1], a.dims[1], at, a.size));  // the updates' index block starts at `at`
    for (const Value& v : batched_indices(a, 2)) in.push_back(v);
  }
  if (auto os = out_sharding_param(a.params, aval_of(a.in[0]).shape.size() - (a.dims[0] != kNotBatched))) {
    os->insert(os->begin(), AxisNames{});  // the mapped dim is not sharded
    params.set("out_sharding", std::vector<StrList>(os->begin(), os->end()));
  }
  return {meshsim::bind(a.prim, in, params), {0}};
}

// JAX's _scatter_spec_computation for scatter(operand, updates, *indices):
// indexed operand dims replicated, the updates' and indices' batch dims
// replicated, the updates' window dims as the operand's (jnp broadcasts the
// updates to the operand's slice sharding, so a replicated one conforms).
// A batch axis d (`.at[:, idx]`'s full slice: JAX's window dim) keeps its
// sharding, which the updates' and indices' dim d share.
std::vector<Spec> scatter_rule(const Avals& in, const Params& p, const Avals&) {
  const Aval &x = in[0], &u = in[1];
  // `.at[idx].set(..., out_sharding=)`: the result is laid out as asked; the operand,
  // updates and indices are brought to match it (index_plan).
  if (auto os = out_sharding_param(p, x.shape.size())) return {*os};
  const Avals indices(in.begin() + 2, in.end());
  const IntList& axes = p.get<IntList>("axes");
  const IntList batch = p.get_or<IntList>("batch_axes", IntList{});
  const int64_t at = p.get<int64_t>("index_dims_at");
  const Spec xs = spec_of(x), us = spec_of(u);
  const int64_t nb = static_cast<int64_t>(indices[0].shape.size());
  auto bspec = index_batch_spec(indices);
  bool ok = bspec.has_value();
  for (int64_t a : axes) ok &= in_list(batch, a) || xs[a].empty();
  Spec o = xs;
  auto conform = [&](const AxisNames& ue, AxisNames& od) {
    if (!ue.empty() && !od.empty() && ue != od) ok = false;
    if (od.empty()) od = ue;
  };
  int64_t ud = 0;
  for (size_t d = 0; d < xs.size() && ok; ++d) {
    if (in_list(axes, static_cast<int64_t>(d))) continue;
    if (ud == at) ud += nb;
    conform(us[ud++], o[d]);
  }
  for (int64_t b = 0; b < nb && ok; ++b) {
    if (in_list(batch, b)) {
      conform(us[at + b], o[b]);
      const AxisNames& ib = (*bspec)[b];
      ok &= ib.empty() || ib == o[b];
    } else {
      ok &= us[at + b].empty() && (*bspec)[b].empty();
    }
  }
  if (!ok) {
    Aval shown_u = u;  // as jnp broadcast it: its window dims laid out as the operand's
    shown_u.spec = us;
    shown_u.vma.clear();
    for (size_t d = 0, k = 0; d < xs.size(); ++d) {
      if (in_list(axes, static_cast<int64_t>(d))) continue;
      if (static_cast<int64_t>(k) == at) k += nb;
      if (shown_u.spec[k].empty()) shown_u.spec[k] = xs[d];
      ++k;
    }
    for (int64_t b : batch)
      if (shown_u.spec[at + b].empty()) shown_u.spec[at + b] = xs[b];
    // JAX's indices array leaves out the window (batch) dims and components.
    Spec shown = bspec ? *bspec : spec_of(indices[0]);
    Avals non_batch;
    for (size_t j = 0; j < axes.size(); ++j)
      if (!in_list(batch, axes[j])) non_batch.push_back(indices[j]);
    Aval shown_i = jax_indices_aval(non_batch.empty() ? indices : non_batch, shown);
    Shape ishape;
    Spec ispec;
    for (int64_t b = 0; b < static_cast<int64_t>(shown_i.shape.size()); ++b)
      if (b >= nb || !in_list(batch, b)) ishape.push_back(shown_i.shape[b]), ispec.push_back(shown_i.spec[b]);
    shown_i.shape = ishape;
    shown_i.spec = ispec;
    fail<ShardingTypeError>("Use `.at[...].set/add/mul/...(out_sharding=)` to provide output "
                            "PartitionSpec for the scatter update as out sharding could not be "
                            "resolved unambiguously (or would require collectives on inputs). Got "
                            "operand=", x.repr(), ", indices=", shown_i.repr(),
                            ", updates=", shown_u.repr());
  }
  return {o};
}

// With `out_sharding` the result was laid out as asked, whatever the operands' layouts, as
// JAX computes it under auto_axes; the rule below then runs on whole (replicated) operands
// and cotangent, which no layout can make ambiguous, and each cotangent is laid out as its
// operand.
std::function<Cotangents(const VjpArgs&)> on_whole_values(std::function<Cotangents(const VjpArgs&)> vjp) {
  if (!vjp) return vjp;
  return [vjp](const VjpArgs& a) {
    if (!out_sharding_param(a.params, 0)) return vjp(a);
    Values in, out{whole(a.out[0])};
    for (const Value& v : a.in) in.push_back(whole(v));
    Cotangents ct = a.ct;
    if (ct[0]) ct[0] = whole(*ct[0]);
    Params params = a.params;
    params.set("out_sharding", std::monostate{});
    Cotangents result = vjp(VjpArgs{in, out, ct, params, a.wants});
    for (size_t i = 0; i < result.size(); ++i)
      if (result[i]) result[i] = ops::reshard_like(*result[i], aval_of(a.in[i]));
    return result;
  };
}

// combine(current, update) -> new value.
template <class Combine>
void scatter(const std::string& name, Combine combine,
             std::function<Cotangents(const VjpArgs&)> vjp = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = at_least(2);  // the operand and the updates, then the index arrays
  p.fuses_operands = true;  // XLA fuses the operands it scatters
  p.sharding_rule = scatter_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) { return index_plan(in, p, out, true); };
  p.factors = [](const Avals& in, const Params& p, const Avals& out) { return index_factors(in, p, out, true); };
  p.vjp = on_whole_values(std::move(vjp));
  p.batch = scatter_batch;
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    parse_mode(name, params, true);
    const Aval &x = in[0], &upd = in[1];
    Layout l = check_indices(name, x, Avals(in.begin() + 2, in.end()), params);
    if (upd.dtype != x.dtype)
      fail<TypeError>(name, " updates must have the operand's dtype ", dtype_name(x.dtype), ", got ",
                      dtype_name(upd.dtype));
    Shape want = result_shape(l, x.shape);
    if (upd.shape != want)
      fail<ValueError>(name, " updates of shape ", shape_str(upd.shape), " do not match the indexed shape ",
                       shape_str(want));
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [combine](const Tensors& in, const Params& params, const Avals&) {
    const Tensor& upd = in[1];
    Layout l = layout_of(params, in[2].shape(), in[0].ndim());
    Tensor res = updatable_copy(in, 0);  // the operand itself when it is read for the last time
    auto boff = batch_offsets(res, &in[2], l, parse_mode("scatter", params, true), params);
    auto dispatch = [&](auto&& f) {
      if (is_complex(res.dtype())) dispatch_complex(res.dtype(), f);
      else dispatch_dtype(res.dtype(), f);
    };
    dispatch([&](auto tag) {
      using T = decltype(tag);
      T* dst = res.data<T>();
      const T* u = upd.data<T>();
      auto update = [&](int64_t a, int64_t o) { dst[a] = combine(dst[a], u[o]); };
      walk(
          res, l, boff, upd, update,
          [&](int64_t a, int64_t o, int64_t n) {
            T* __restrict d = dst + a;
            const T* __restrict v = u + o;
            for (int64_t t = 0; t < n; ++t) d[t] = combine(d[t], v[t]);
          },
          [](int64_t, int64_t) {});
    });
    return as_tensors(std::move(res));
  };
  accept_jax_form(p, /*scatter=*/true);
  register_primitive(std::move(p));
}

// NaN-propagating, as lax.min/lax.max; complex numbers as lax.min/max
// compare them (complex_math.h).
template <class T>
T nan_min(T a, T b) {
  if constexpr (is_complex_v<T>) return min_op(a, b);
  else {
    if constexpr (std::is_floating_point_v<T>) if (std::isnan(a) || std::isnan(b)) return a + b;
    return b < a ? b : a;
  }
}
template <class T>
T nan_max(T a, T b) {
  if constexpr (is_complex_v<T>) return max_op(a, b);
  else {
    if constexpr (std::is_floating_point_v<T>) if (std::isnan(a) || std::isnan(b)) return a + b;
    return b > a ? b : a;
  }
}

}  // namespace

void register_scatters() {
  scatter("scatter", [](auto, auto u) { return u; }, scatter_vjp);
  scatter("scatter_add", [](auto a, auto u) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a || u;
    else if constexpr (is_complex_v<decltype(a)>) return add_op(a, u);
    else return static_cast<decltype(a)>(a + u);
  }, scatter_add_vjp);
  scatter("scatter_sub", [](auto a, auto u) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a != u;
    else if constexpr (is_complex_v<decltype(a)>) return sub_op(a, u);
    else return static_cast<decltype(a)>(a - u);
  }, scatter_sub_vjp);
  scatter("scatter_mul", [](auto a, auto u) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a && u;
    else if constexpr (is_complex_v<decltype(a)>) return mul_op(u, a);  // XLA's fused products, update first
    else return static_cast<decltype(a)>(a * u);
  }, scatter_mul_vjp);
  scatter("scatter_min", [](auto a, auto u) { return nan_min(a, u); }, scatter_extremal_vjp);
  scatter("scatter_max", [](auto a, auto u) { return nan_max(a, u); }, scatter_extremal_vjp);
}

}  // namespace meshsim::indexing
