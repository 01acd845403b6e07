// conv_general_dilated with JAX's params: window_strides, padding (low, high)
// per spatial dimension (negative crops), lhs_dilation (transposed
// convolution), rhs_dilation (atrous), dimension_numbers (lhs_spec, rhs_spec,
// out_spec: batch/feature then spatial dims), feature_group_count,
// batch_group_count and preferred_element_type.
//
// The kernel (kernels/convolution.h) computes channels-last: each device's
// operands are packed as [N, spatial..., C] and [window..., I, O] (no copy
// when the dimension numbers say so already) and the result comes back as
// [N, spatial..., O], viewed in out_spec's order. Narrow floats compute in
// float32 and round once. The VJPs are JAX's transposes, which are
// convolutions again, so they differentiate, batch and shard like the forward.
#include <algorithm>
#include <numeric>

#include "meshsim/ir/printing.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/convolution.h"
#include "meshsim/kernels/windows.h"
#include "meshsim/primitives/convolution.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"

namespace meshsim {
namespace {

constexpr const char* kConv = "conv_general_dilated";

// ---- params --------------------------------------------------------------------

struct ConvParams {
  IntList lhs_spec, rhs_spec, out_spec;  // (batch, feature, spatial...) and (out, in, spatial...)
  IntList strides, lhs_dilation, rhs_dilation;
  IntLists padding;  // (low, high) per spatial dimension
  int64_t feature_groups = 1, batch_groups = 1;
  size_t spatial() const { return strides.size(); }
};

// A tuple-of-tuples param; `()` arrives as an empty IntList.
IntLists int_lists(const Params& p, const std::string& name) {
  for (const auto& [key, value] : p.items())
    if (key == name) {
      if (auto* l = std::get_if<IntLists>(&value)) return *l;
      if (auto* l = std::get_if<IntList>(&value); l && l->empty()) return {};
    }
  return p.get<IntLists>(name);  // raises naming the param
}

IntList int_list(const Params& p, const std::string& name) { return p.get<IntList>(name); }

ConvParams conv_params(const Params& p) {
  ConvParams c;
  const IntLists dn = int_lists(p, "dimension_numbers");
  if (dn.size() != 3)
    fail<TypeError>("conv_general_dilated dimension_numbers must be (lhs_spec, rhs_spec, out_spec), got ",
                    param_value_str(dn));
  c.lhs_spec = dn[0];
  c.rhs_spec = dn[1];
  c.out_spec = dn[2];
  c.strides = int_list(p, "window_strides");
  c.lhs_dilation = int_list(p, "lhs_dilation");
  c.rhs_dilation = int_list(p, "rhs_dilation");
  c.padding = int_lists(p, "padding");
  c.feature_groups = p.get<int64_t>("feature_group_count");
  c.batch_groups = p.get<int64_t>("batch_group_count");
  return c;
}

Params with_conv(Params p, const ConvParams& c) {
  p.set("window_strides", c.strides);
  p.set("padding", c.padding);
  p.set("lhs_dilation", c.lhs_dilation);
  p.set("rhs_dilation", c.rhs_dilation);
  p.set("dimension_numbers", IntLists{c.lhs_spec, c.rhs_spec, c.out_spec});
  p.set("feature_group_count", c.feature_groups);
  p.set("batch_group_count", c.batch_groups);
  return p;
}

int64_t dilate(int64_t d, int64_t dilation) { return d == 0 ? 0 : 1 + dilation * (d - 1); }

Shape take(const Shape& shape, const IntList& dims) {
  Shape out;
  for (int64_t d : dims) out.push_back(shape[d]);
  return out;
}

// ---- type rule (JAX's _conv_general_dilated_shape_rule and dtype rule) ------------

void check_dims(const char* what, const IntList& spec, int64_t ndim) {
  IntList sorted = spec;
  std::sort(sorted.begin(), sorted.end());
  IntList iota(ndim);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    fail<TypeError>("conv_general_dilated dimension_numbers.", what, " must be a permutation of the ", ndim,
                    " dimensions, got ", param_value_str(spec));
}

void check_dilation(const IntList& dilation) {
  for (int64_t d : dilation)
    if (d <= 0) fail<TypeError>("All dilations must be positive, got ", param_value_str(dilation), ".");
}

DType conv_result_dtype(const Aval& lhs, const Aval& rhs, const Params& p) {
  if (lhs.dtype != rhs.dtype)
    fail<TypeError>("lax.conv_general_dilated requires arguments to have the same dtypes, got ",
                    dtype_name(lhs.dtype), ", ", dtype_name(rhs.dtype), ".");
  if (p.is_none("preferred_element_type")) return lhs.dtype;
  const DType preferred = p.get<DType>("preferred_element_type");
  const DType in = lhs.dtype;
  const bool exact_in = !is_inexact(in);
  if (exact_in && is_floating(preferred)) return preferred;  // integers into floats
  if (exact_in != !is_inexact(preferred) || is_complex(in) != is_complex(preferred))
    fail<TypeError>("Input type is incompatible with `preferred_element_type`. The compatible combinations "
                    "of (input_type, preferred_element_type) are (integral, integral), (integral, "
                    "floating), (floating, floating), (complex, complex.");
  if (itemsize(preferred) < itemsize(in))
    fail<TypeError>("`preferred_element_type` must not be narrower than the original type.");
  return preferred;
}

Avals conv_eval(const Avals& in, const Params& p) {
  const Aval &lhs = in[0], &rhs = in[1];
  const ConvParams c = conv_params(p);
  if (lhs.ndim() != rhs.ndim())
    fail<ValueError>("conv_general_dilated lhs and rhs must have the same number of dimensions, but got ",
                     shape_str(lhs.shape), " and ", shape_str(rhs.shape), ".");
  check_dims("lhs_spec", c.lhs_spec, lhs.ndim());
  check_dims("rhs_spec", c.rhs_spec, rhs.ndim());
  check_dims("out_spec", c.out_spec, lhs.ndim());
  const int64_t G = c.feature_groups, B = c.batch_groups;
  if (G <= 0)
    fail<ValueError>("conv_general_dilated feature_group_count must be a positive integer, got ", G, ".");
  const int64_t features = lhs.shape[c.lhs_spec[1]], in_features = rhs.shape[c.rhs_spec[1]],
                out_features = rhs.shape[c.rhs_spec[0]], batch = lhs.shape[c.lhs_spec[0]];
  if (features % G)
    fail<ValueError>("conv_general_dilated feature_group_count must divide lhs feature dimension size, but ",
                     G, " does not divide ", features, ".");
  if (features / G != in_features)
    fail<ValueError>("conv_general_dilated lhs feature dimension size divided by feature_group_count must "
                     "equal the rhs input feature dimension size, but ", features, " // ", G, " != ",
                     in_features, ".");
  if (out_features % G)
    fail<ValueError>("conv_general_dilated rhs output feature dimension size must be a multiple of "
                     "feature_group_count, but ", out_features, " is not a multiple of ", G, ".");
  if (B <= 0)
    fail<ValueError>("conv_general_dilated batch_group_count must be a positive integer, got ", B, ".");
  if (B > 1 && batch % B)
    fail<ValueError>("conv_general_dilated batch_group_count must divide lhs batch dimension size, but ", B,
                     " does not divide ", batch, ".");
  if (out_features % B)
    fail<ValueError>("conv_general_dilated rhs output feature dimension size must be a multiple of "
                     "batch_group_count, but ", out_features, " is not a multiple of ", B, ".");
  if (B > 1 && G > 1)
    fail<ValueError>("At most one of batch_group_count and feature_group_count may be > 1, got "
                     "batch_group_count=", B, " and feature_group_count=", G);
  const size_t n = static_cast<size_t>(rhs.ndim()) - 2;
  if (n != c.strides.size())
    fail<ValueError>("conv_general_dilated window and window_strides must have the same number of "
                     "dimensions, but got ", n, " and ", c.strides.size());
  for (int64_t s : c.strides)
    if (s <= 0) fail<ValueError>("conv_general_dilated window_strides must be positive, got ",
                                 param_value_str(c.strides));
  check_dilation(c.lhs_dilation);
  check_dilation(c.rhs_dilation);
  if (c.lhs_dilation.size() != n || c.rhs_dilation.size() != n)
    fail<ValueError>("conv_general_dilated lhs_dilation and rhs_dilation must have ", n, " entries, got ",
                     param_value_str(c.lhs_dilation), " and ", param_value_str(c.rhs_dilation));
  if (c.padding.size() != n)
    fail<TypeError>("Wrong number of explicit pads for convolution: expected ", n, ", got ",
                    c.padding.size(), ".");
  Shape out_trans{B > 1 ? batch / B : batch, out_features};
  for (size_t i = 0; i < n; ++i) {
    const int64_t padded = dilate(lhs.shape[c.lhs_spec[2 + i]], c.lhs_dilation[i]) + c.padding[i][0] +
                           c.padding[i][1];
    if (padded < 0)
      fail<ValueError>("Negative padding is larger than the size of the corresponding dimension: got "
                       "padding=", param_value_str(c.padding), " for lhs_shape[2:]=",
                       shape_str(take(lhs.shape, IntList(c.lhs_spec.begin() + 2, c.lhs_spec.end()))));
    out_trans.push_back(window_output_size(lhs.shape[c.lhs_spec[2 + i]], rhs.shape[c.rhs_spec[2 + i]],
                                           c.strides[i], c.padding[i][0], c.padding[i][1], c.lhs_dilation[i],
                                           c.rhs_dilation[i]));
  }
  Shape out(out_trans.size());
  for (size_t i = 0; i < out_trans.size(); ++i) out[c.out_spec[i]] = out_trans[i];
  return {like(lhs, out, conv_result_dtype(lhs, rhs, p))};
}

// ---- kernel ---------------------------------------------------------------------

// Floats are computed in float32/float64 (narrow floats in float32), integers
// and complex numbers in the result type, as dot_general does.
DType conv_compute_dtype(DType in, DType out) {
  const DType dt = is_floating(in) && !is_floating(out) ? in : out;
  if (is_floating(dt)) return dt == DType::Float64 ? DType::Float64 : DType::Float32;
  return dt == DType::Bool ? DType::Int32 : dt;
}

// A spec's dimensions in channels-last order: (batch, spatial..., feature),
// or for filters (spatial..., in, out).
IntList channels_last(const IntList& spec) {
  IntList perm(spec.begin() + 2, spec.end());
  perm.insert(perm.begin(), spec[0]);
  perm.push_back(spec[1]);
  return perm;
}
IntList filters_last(const IntList& spec) {
  IntList perm(spec.begin() + 2, spec.end());
  perm.push_back(spec[1]);
  perm.push_back(spec[0]);
  return perm;
}

// `t` in the compute dtype with its dimensions in `perm`'s order, packed:
// one pass, and none when it is already so.
Tensor packed(const Tensor& t, const IntList& perm, DType dt) { return cast(t.transpose(perm), dt).contiguous(); }

// Operands are packed channels-last (no copy when the dimension numbers are
// NHWC/HWIO/NHWC already), the kernel writes the result channels-last, and
// a view puts its dimensions back in out_spec's order.
Tensors conv_kernel(const Tensors& in, const Params& p, const Avals& out) {
  const ConvParams c = conv_params(p);
  const DType dt = conv_compute_dtype(in[0].dtype(), out[0].dtype);
  const IntList out_perm = channels_last(c.out_spec);
  Tensor result = Tensor::empty(dt, take(out[0].shape, out_perm));
  if (result.size() > 0 && (in[0].size() == 0 || in[1].size() == 0)) {
    result = Tensor::zeros(dt, result.shape());
  } else if (result.size() > 0) {
    const Tensor x = packed(in[0], channels_last(c.lhs_spec), dt);
    const Tensor w = packed(in[1], filters_last(c.rhs_spec), dt);
    const Shape &xs = x.shape(), &ws = w.shape(), &rs = result.shape();
    const size_t n = c.spatial();
    ConvGeometry g;
    for (size_t d = 0; d < n; ++d)
      g.spatial.push_back({xs[1 + d], ws[d], rs[1 + d], c.strides[d], c.padding[d][0], c.lhs_dilation[d],
                           c.rhs_dilation[d]});
    g.examples = rs[0];
    g.lhs_features = xs[n + 1];
    g.in_features = ws[n];
    g.out_features = ws[n + 1];
    g.groups = c.feature_groups * c.batch_groups;
    g.batch_grouped = c.batch_groups > 1;
    conv_channels_last(dt, x.raw(), w.raw(), result.raw(), g);
  }
  IntList back(out_perm.size());
  for (size_t i = 0; i < out_perm.size(); ++i) back[out_perm[i]] = static_cast<int64_t>(i);
  return {cast(result.transpose(back), out[0].dtype).contiguous()};
}

// A multiply and an add per output element and window element of its group.
Cost conv_cost(const Avals& in, const Params& p, const Avals& out) {
  const ConvParams c = conv_params(p);
  Cost cost = memory_cost(in, out);
  double window = 1;
  for (size_t d = 1; d < c.rhs_spec.size(); ++d) window *= static_cast<double>(in[1].shape[c.rhs_spec[d]]);
  cost.flops = 2 * window * static_cast<double>(num_elements(out[0].shape));
  return cost;
}

// ---- layout helpers on values (JAX's _reshape_axis_into / _reshape_axis_out_of) ---

// Moves dimension `src` next to `dst` (of the shape without src) and merges them, src major.
Value reshape_axis_into(int64_t src, int64_t dst, const Value& x) {
  const Shape shape = aval_of(x).shape;
  IntList perm;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Shape merged;
  for (int64_t i : perm) merged.push_back(shape[i]);
  merged[dst] *= merged[dst + 1];
  merged.erase(merged.begin() + dst + 1);
  return ops::reshape(ops::transpose(x, perm), merged);
}

// Splits dimension `src` into (size, rest).
Value reshape_axis_out_of(int64_t src, int64_t size, const Value& x) {
  Shape shape = aval_of(x).shape;
  const int64_t rest = shape[src] / size;
  shape[src] = rest;
  shape.insert(shape.begin() + src, size);
  return ops::reshape(x, shape);
}

IntList spatial_of(const IntList& spec) { return IntList(spec.begin() + 2, spec.end()); }
IntList swap_first_two(IntList spec) {
  std::swap(spec[0], spec[1]);
  return spec;
}

std::optional<Spec> sharding_like(const Aval& a) {
  if (!a.mesh) return std::nullopt;
  return spec_of(a);
}

Value conv(const Value& lhs, const Value& rhs, const ConvParams& c, Params p, const std::optional<Spec>& out) {
  p = with_conv(std::move(p), c);
  p.set("out_sharding", out ? ParamValue(std::vector<StrList>(*out)) : ParamValue(std::monostate{}));
  return ops::bind1(kConv, {lhs, rhs}, p);
}

// ---- VJP (JAX's _conv_general_dilated_transpose_lhs / _rhs) -----------------------

// Spatial dimension i's dilated input, window and output (strided) sizes.
struct DilatedSizes {
  int64_t in, window, out;
};
DilatedSizes dilated_sizes(const ConvParams& c, size_t i, const Aval& lhs, const Aval& rhs, const Aval& g) {
  return {dilate(lhs.shape[c.lhs_spec[2 + i]], c.lhs_dilation[i]),
          dilate(rhs.shape[c.rhs_spec[2 + i]], c.rhs_dilation[i]),
          dilate(g.shape[c.out_spec[2 + i]], c.strides[i])};
}

Value transpose_lhs(const Value& g, const Value& lhs, const Value& rhs, const ConvParams& c, const Params& p) {
  const Aval la = aval_of(lhs), ra = aval_of(rhs), ga = aval_of(g);
  Value w = rhs;
  const int64_t groups = std::max(c.feature_groups, c.batch_groups);
  if (groups > 1)
    w = reshape_axis_into(c.rhs_spec[0], c.rhs_spec[1], reshape_axis_out_of(c.rhs_spec[0], groups, w));
  ConvParams t{c.out_spec, swap_first_two(c.rhs_spec), c.lhs_spec, c.lhs_dilation, c.strides, c.rhs_dilation,
               {}, groups, 1};
  for (size_t i = 0; i < c.spatial(); ++i) {
    const DilatedSizes d = dilated_sizes(c, i, la, ra, ga);
    const int64_t before = d.window - c.padding[i][0] - 1;
    t.padding.push_back({before, d.in + d.window - 1 - d.out - before});
  }
  Value revd = ops::rev(w, spatial_of(c.rhs_spec));
  if (aval_of(revd).dtype != ga.dtype) revd = ops::convert(revd, ga.dtype);
  Value out = conv(g, revd, t, p, c.batch_groups > 1 ? std::nullopt : sharding_like(la));
  if (aval_of(out).dtype != la.dtype) out = ops::convert(out, la.dtype);
  if (c.batch_groups > 1)
    out = reshape_axis_into(c.lhs_spec[1], c.lhs_spec[0], reshape_axis_out_of(c.lhs_spec[1], c.batch_groups, out));
  return out;
}

Value transpose_rhs(const Value& g, const Value& lhs, const Value& rhs, const ConvParams& c, const Params& p) {
  const Aval la = aval_of(lhs), ra = aval_of(rhs), ga = aval_of(g);
  if (num_elements(ga.shape) == 0) return ops::zeros(ra);
  ConvParams t{swap_first_two(c.lhs_spec), swap_first_two(c.out_spec), swap_first_two(c.rhs_spec),
               c.rhs_dilation, c.lhs_dilation, c.strides, {}, c.batch_groups, c.feature_groups};
  for (size_t i = 0; i < c.spatial(); ++i) {
    const DilatedSizes d = dilated_sizes(c, i, la, ra, ga);
    const int64_t lo = c.padding[i][0];
    t.padding.push_back({lo, (d.out - d.in) + (d.window - lo - 1)});
  }
  const Value x = la.dtype != ga.dtype ? ops::convert(lhs, ga.dtype) : lhs;
  Value out = conv(x, g, t, p, sharding_like(ra));
  if (aval_of(out).dtype != ra.dtype) out = ops::convert(out, ra.dtype);
  return out;
}

Cotangents conv_vjp(const VjpArgs& a) {
  const ConvParams c = conv_params(a.params);
  const Value& g = *a.ct[0];
  Cotangents ct(2);
  if (a.wants[0]) ct[0] = transpose_lhs(g, a.in[0], a.in[1], c, a.params);
  if (a.wants[1]) ct[1] = transpose_rhs(g, a.in[0], a.in[1], c, a.params);
  return ct;
}

// ---- batching (JAX's _conv_general_dilated_batch_rule) -----------------------------

Aval without_dim(Aval a, int64_t dim) {
  a.shape.erase(a.shape.begin() + dim);
  if (!a.spec.empty()) a.spec.erase(a.spec.begin() + dim);
  return a;
}

Batched conv_batch(const BatchArgs& a) {
  ConvParams c = conv_params(a.params);
  const int64_t ld = a.dims[0], rd = a.dims[1], size = a.size;
  const bool lb = ld != kNotBatched, rb = rd != kNotBatched;
  const Value &lhs = a.in[0], &rhs = a.in[1];
  auto run = [&](const Value& l, const Value& r) {
    return ops::bind1(kConv, {l, r}, with_conv(a.params, c));
  };
  if (size == 0) {
    const Aval la = aval_of(lhs), ra = aval_of(rhs);
    Aval out = conv_eval({lb ? without_dim(la, ld) : la, rb ? without_dim(ra, rd) : ra}, a.params)[0];
    out.shape.insert(out.shape.begin(), 0);
    return {{ops::full(out.shape, out.dtype, 0.0)}, {0}};
  }
  const int64_t ob = c.out_spec[0], of = c.out_spec[1];
  if (lb && rb) {
    Value l;
    if (c.batch_groups > 1) {
      l = reshape_axis_into(ld, c.lhs_spec[0], lhs);
      c.batch_groups *= size;
    } else {
      l = reshape_axis_into(ld, c.lhs_spec[1], lhs);
      c.feature_groups *= size;
    }
    const Value out = run(l, reshape_axis_into(rd, c.rhs_spec[0], rhs));
    return {{reshape_axis_out_of(of, size, out)}, {of}};
  }
  if (lb) {
    const int64_t n = c.lhs_spec[0];
    Value l;
    if (c.batch_groups == 1) {
      l = reshape_axis_into(ld, n, lhs);
    } else {  // the vmapped examples go inside each batch group
      l = reshape_axis_out_of(n + (ld <= n ? 1 : 0), c.batch_groups, lhs);
      l = reshape_axis_into(ld + (n < ld ? 1 : 0), n + 1, l);
      l = reshape_axis_into(n, n, l);
    }
    return {{reshape_axis_out_of(ob, size, run(l, rhs))}, {ob}};
  }
  const int64_t o = c.rhs_spec[0];
  if (c.feature_groups == 1 && c.batch_groups == 1)
    return {{reshape_axis_out_of(of, size, run(lhs, reshape_axis_into(rd, o, rhs)))}, {of}};
  // The vmapped filters go inside each group.
  const int64_t groups = std::max(c.feature_groups, c.batch_groups);
  Value r = reshape_axis_out_of(o + (rd <= o ? 1 : 0), groups, rhs);
  r = reshape_axis_into(rd + (o < rd ? 1 : 0), o + 1, r);
  r = reshape_axis_into(o, o, r);
  Value out = reshape_axis_out_of(of, groups, run(lhs, r));
  out = reshape_axis_out_of(of + 1, size, out);
  return {{reshape_axis_into(of, of + 1, out)}, {of}};
}

// ---- sharding in types -------------------------------------------------------------

// JAX's rule: with replicated filters and an unsharded lhs feature dimension
// the result is laid out as the lhs (dimension by position); anything else
// needs `out_sharding`.
std::vector<Spec> conv_rule(const Avals& in, const Params& p, const Avals& out) {
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const ConvParams c = conv_params(p);
  const Aval &lhs = in[0], &rhs = in[1];
  if ((!rhs.mesh || is_replicated(spec_of(rhs))) && spec_of(lhs)[c.lhs_spec[1]].empty())
    return varying_shape_rule(kConv, lhs, out[0].shape);
  fail<ShardingTypeError>("Please specify the output sharding via `out_sharding` parameter of "
                          "`conv_general_dilated`");
}

// Each device convolves its own examples (lhs batch) with its own filters
// (rhs output features); every other dimension is gathered whole first, and
// the result is then resharded to its type.
std::optional<LocalPlan> conv_plan(const Avals& in, const Params& p, const Avals& out) {
  const ConvParams c = conv_params(p);
  const Spec ls = spec_of(in[0]), rs = spec_of(in[1]);
  Spec l(ls.size()), r(rs.size()), o(out[0].shape.size());
  if (c.batch_groups == 1) {
    l[c.lhs_spec[0]] = ls[c.lhs_spec[0]];
    o[c.out_spec[0]] = l[c.lhs_spec[0]];
  }
  const AxisNames& filters = rs[c.rhs_spec[0]];
  const bool clash = std::any_of(filters.begin(), filters.end(), [&](const std::string& axis) {
    const AxisNames& b = l[c.lhs_spec[0]];
    return std::find(b.begin(), b.end(), axis) != b.end();
  });
  if (c.feature_groups == 1 && c.batch_groups == 1 && !clash) {
    r[c.rhs_spec[0]] = filters;
    o[c.out_spec[1]] = filters;
  }
  LocalPlan plan;
  plan.in_specs = {l, r};
  plan.params = p;
  plan.params.set("out_sharding", std::monostate{});
  plan.out_specs = {o};
  return plan;
}

// Sharding propagation over Auto axes, as the local plan runs it: examples
// (lhs batch) and filters (rhs output features) pass to the result; every
// other dimension is computed whole.
std::optional<FactorMap> conv_factors(const Avals& in, const Params& p, const Avals& out) {
  const ConvParams c = conv_params(p);
  FactorMap m = blank_factors(in, out);
  if (c.batch_groups != 1) return m;
  m.in[0][c.lhs_spec[0]] = m.out[0][c.out_spec[0]] = m.num_factors++;
  if (c.feature_groups == 1) m.in[1][c.rhs_spec[0]] = m.out[0][c.out_spec[1]] = m.num_factors++;
  return m;
}

}  // namespace

void register_convolution_primitives() {
  Primitive p;
  p.name = kConv;
  p.operands = exactly(2);
  p.uses_blas = true;
  p.abstract_eval = conv_eval;
  p.kernel = conv_kernel;
  p.vjp = conv_vjp;
  p.batch = conv_batch;
  p.cost = conv_cost;
  p.sharding_rule = conv_rule;
  p.local_plan = conv_plan;
  p.factors = conv_factors;
  // JAX's dots_saveable saves convolutions too; dots_with_no_batch_dims_saveable does not.
  p.saved_as_dot = [](const Params&) { return false; };
  p.print_rule = [](PrintedEquation& e) {
    if (const auto* d = std::get_if<IntLists>(e.find("dimension_numbers")); d && d->size() == 3)
      e.spell("dimension_numbers", "ConvDimensionNumbers(lhs_spec=" + param_value_str((*d)[0]) + ", rhs_spec=" +
                                       param_value_str((*d)[1]) + ", out_spec=" + param_value_str((*d)[2]) + ")");
  };
  register_primitive(std::move(p));
}

}  // namespace meshsim
