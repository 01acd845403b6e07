// Windowed reductions with JAX's names and params (window_dimensions,
// window_strides, padding, base_dilation, window_dilation):
// reduce_window_sum, reduce_window_max, reduce_window_min; and the max/min
// pooling derivatives select_and_scatter_add (each window's cotangent added
// at the element its select_prim picks, the first maximum for `ge`) and
// select_and_gather_add (each window's tangent at that element), which are
// each other's transposes, as in JAX.
//
// Every output position meets the input elements its window reads (kernels/
// windows.h: padding and base-dilation holes read nothing, i.e. the identity)
// in the window's row-major order, one window offset at a time across all
// outputs. Narrow floats compute in float32.
#include <cmath>
#include <cstring>
#include <map>
#include <limits>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/windows.h"
#include "meshsim/primitives/windows.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"

namespace meshsim {
namespace {

struct Window {
  IntList dims, strides, base_dilation, window_dilation;
  IntLists padding;
  size_t ndim() const { return dims.size(); }
};

IntLists pairs_param(const Params& p, const std::string& name) {
  for (const auto& [key, value] : p.items())
    if (key == name) {
      if (auto* l = std::get_if<IntList>(&value); l && l->empty()) return {};
    }
  return p.get<IntLists>(name);
}

IntList ones(size_t n) { return IntList(n, 1); }

// select_and_scatter_add has no dilation params: they are 1.
Window window_of(const Params& p) {
  Window w;
  w.dims = p.get<IntList>("window_dimensions");
  w.strides = p.get<IntList>("window_strides");
  w.padding = pairs_param(p, "padding");
  w.base_dilation = p.has("base_dilation") ? p.get<IntList>("base_dilation") : ones(w.dims.size());
  w.window_dilation = p.has("window_dilation") ? p.get<IntList>("window_dilation") : ones(w.dims.size());
  return w;
}

// JAX's _common_reduce_window_shape_rule, with its messages.
Shape window_output_shape(const Shape& operand, const Window& w) {
  auto check_positive = [](const char* what, const IntList& l, bool nonzero) {
    for (int64_t v : l)
      if (v < 0 || (nonzero && v == 0))
        fail<TypeError>("reduce_window ", what, " must have every element be ",
                        nonzero ? "strictly positive" : "nonnegative", ", got ", param_value_str(l), ".");
  };
  check_positive("window_strides", w.strides, true);
  check_positive("base_dilation", w.base_dilation, false);
  check_positive("window_dilation", w.window_dilation, false);
  if (operand.size() != w.dims.size())
    fail<TypeError>("reduce_window got the wrong number of window_dimensions for operand: got operand shape ",
                    shape_str(operand), " with window_dimensions ", param_value_str(w.dims), ".");
  auto consistent = [&](const char* what, size_t n, const std::string& value) {
    if (n != w.dims.size())
      fail<TypeError>("reduce_window got inconsistent ", what, " and window_dimensions: got ", what, " ", value,
                      " and window_dimensions ", param_value_str(w.dims), ".");
  };
  consistent("window_strides", w.strides.size(), param_value_str(w.strides));
  consistent("base_dilation", w.base_dilation.size(), param_value_str(w.base_dilation));
  consistent("window_dilation", w.window_dilation.size(), param_value_str(w.window_dilation));
  if (w.padding.size() != w.dims.size())
    fail<TypeError>("reduce_window got inconsistent padding and window_dimensions: got padding ",
                    param_value_str(w.padding), " and window_dimensions ", param_value_str(w.dims), ".");
  Shape out;
  for (size_t d = 0; d < operand.size(); ++d)
    out.push_back(window_output_size(operand[d], w.dims[d], w.strides[d], w.padding[d][0], w.padding[d][1],
                                     w.base_dilation[d], w.window_dilation[d]));
  return out;
}

// Every (output position, input element its window reads) pair, each output
// meeting its elements in the window's row-major order. Along the innermost
// dimension the pairs come as runs of consecutive outputs reading consecutive
// inputs (for pooling over NHWC, a window offset's whole run of channels).
class WindowSweep {
 public:
  WindowSweep(const Shape& in, const Shape& out, const Window& w)
      : out_(out), dims_(w.dims), along_(in.size()), in_stride_(in.size()) {
    int64_t in_stride = 1;
    for (size_t d = in.size(); d-- > 0;) {
      along_[d] = window_reads({in[d], w.dims[d], out[d], w.strides[d], w.padding[d][0], w.base_dilation[d],
                                w.window_dilation[d]});
      in_stride_[d] = in_stride;
      in_stride *= in[d];
    }
    if (out.empty()) return;
    const size_t last = out.size() - 1;
    runs_.resize(w.dims[last]);
    for (int64_t k = 0; k < w.dims[last]; ++k) {
      const int64_t* along = along_[last].data() + k * out[last];
      std::vector<Run>& runs = runs_[k];
      for (int64_t o = 0; o < out[last]; ++o) {
        if (along[o] < 0) continue;
        if (!runs.empty() && runs.back().out + runs.back().length == o && runs.back().in + runs.back().length == along[o])
          ++runs.back().length;
        else
          runs.push_back({o, along[o], 1});
      }
    }
  }

  // f(first output, first input, length) for every run of pairs (flat
  // indices): per row of outputs along the innermost dimension, every window
  // offset in turn, so the row stays in cache while its windows combine.
  template <class F>
  void each(F&& f) const {
    if (out_.empty()) {
      f(int64_t{0}, int64_t{0}, int64_t{1});
      return;
    }
    const size_t last = out_.size() - 1;
    const int64_t rows = num_elements(Shape(out_.begin(), out_.begin() + last)), windows = num_elements(dims_);
    IntList o(last, 0), k(dims_.size());
    for (int64_t row = 0; row < rows; ++row) {
      std::fill(k.begin(), k.end(), 0);
      for (int64_t window = 0; window < windows; ++window) {
        int64_t in_base = 0;
        size_t d = 0;
        for (; d < last; ++d) {
          const int64_t q = along_[d][k[d] * out_[d] + o[d]];
          if (q < 0) break;
          in_base += q * in_stride_[d];
        }
        if (d == last)
          for (const Run& r : runs_[k[last]]) f(row * out_[last] + r.out, in_base + r.in, r.length);
        next(k, dims_);
      }
      next(o, out_);
    }
  }

 private:
  struct Run {
    int64_t out = 0, in = 0, length = 0;
  };

  // The next index in row-major order over the leading dimensions of `shape`.
  static void next(IntList& index, const IntList& shape) {
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < shape[d]) return;
      index[d] = 0;
    }
  }

  Shape out_;
  IntList dims_;
  std::vector<std::vector<int64_t>> along_;  // [dim][window offset * out + output index] -> input index or -1
  IntList in_stride_;
  std::vector<std::vector<Run>> runs_;  // innermost dimension: [window offset] -> runs
};

// ---- reductions -----------------------------------------------------------------------

enum class Monoid { Sum, Max, Min };

template <class T>
T identity(Monoid m) {
  if (m == Monoid::Sum) return T(0);
  if constexpr (std::numeric_limits<T>::has_infinity)
    return m == Monoid::Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  return m == Monoid::Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// XLA's max and min propagate NaN.
template <Monoid M, class T>
T combine(T acc, T v) {
  if constexpr (M == Monoid::Sum) {
    return static_cast<T>(acc + v);
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(acc)) return acc;
      if (std::isnan(v)) return v;
    }
    return M == Monoid::Max ? (v > acc ? v : acc) : (v < acc ? v : acc);
  }
}

// acc[j] = combine(acc[j], x[j]) over a run, the monoid fixed at compile time.
template <class T>
void combine_run(Monoid m, T* acc, const T* x, int64_t n) {
  auto run = [&](auto monoid) {
    for (int64_t j = 0; j < n; ++j) acc[j] = combine<decltype(monoid)::value>(acc[j], x[j]);
  };
  if (m == Monoid::Sum) run(std::integral_constant<Monoid, Monoid::Sum>{});
  else if (m == Monoid::Max) run(std::integral_constant<Monoid, Monoid::Max>{});
  else run(std::integral_constant<Monoid, Monoid::Min>{});
}

DType compute_dtype(DType dt) {
  if (is_narrow_float(dt)) return DType::Float32;
  return dt == DType::Bool ? DType::UInt8 : dt;
}

Tensors reduce_window_kernel(Monoid m, const Tensor& x_in, const Window& w, const Aval& out) {
  const DType dt = compute_dtype(x_in.dtype());
  const Tensor x = cast(x_in, dt).contiguous();
  Tensor result = Tensor::empty(dt, out.shape);
  const WindowSweep sweep(x.shape(), out.shape, w);
  dispatch_wide_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* rd = result.data<T>();
    std::fill_n(rd, result.size(), identity<T>(m));
    sweep.each([&](int64_t o, int64_t i, int64_t n) { combine_run(m, rd + o, xd + i, n); });
  });
  return {cast(result, out.dtype)};
}

// ---- selection ------------------------------------------------------------------------

// Per output position, the flat input offset its window selects (-1: empty
// window): the first element, replaced by each later one the comparison
// `select_prim(current, candidate)` rejects.
std::vector<int64_t> selected(const Tensor& operand, const Window& w, const Shape& out, bool ge) {
  const DType dt = compute_dtype(operand.dtype());
  const Tensor x = cast(operand, dt).contiguous();
  std::vector<int64_t> chosen(num_elements(out), -1);
  const WindowSweep sweep(x.shape(), out, w);
  dispatch_wide_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    std::vector<T> best(chosen.size());  // the selected values, read in runs rather than gathered
    sweep.each([&](int64_t o, int64_t i, int64_t n) {
      for (int64_t j = 0; j < n; ++j) {
        const T v = xd[i + j];
        if (chosen[o + j] < 0 || !(ge ? best[o + j] >= v : best[o + j] <= v)) {
          chosen[o + j] = i + j;
          best[o + j] = v;
        }
      }
    });
  });
  return chosen;
}

bool select_ge(const Params& p) {
  const std::string& s = p.get<std::string>("select_prim");
  if (s != "ge" && s != "le") fail<ValueError>("select_prim must be ge or le, got ", s);
  return s == "ge";
}

// Values computed in float32 (narrow floats) or their own type; moved as raw elements.
template <class F>
void dispatch_values(DType dt, F&& f) {
  if (is_floating(dt)) dispatch_wide_float(dt, f);
  else dispatch_integer(dt, f);
}

// select_and_scatter_add(source, operand): zeros shaped as operand, each
// source element added where its window selects.
Tensors scatter_kernel(const Tensors& in, const Params& p, const Avals& out) {
  const Window w = window_of(p);
  const std::vector<int64_t> chosen = selected(in[1], w, in[0].shape(), select_ge(p));
  const DType dt = compute_dtype(in[0].dtype());
  const Tensor source = cast(in[0], dt).contiguous();
  Tensor result = Tensor::zeros(dt, out[0].shape);
  dispatch_values(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* s = source.data<T>();
    T* r = result.data<T>();
    for (size_t i = 0; i < chosen.size(); ++i)
      if (chosen[i] >= 0) r[chosen[i]] = static_cast<T>(r[chosen[i]] + s[i]);
  });
  return {cast(result, out[0].dtype)};
}

// select_and_gather_add(tangents, operand): each window's tangent at the element it selects.
Tensors gather_kernel(const Tensors& in, const Params& p, const Avals& out) {
  const Window w = window_of(p);
  const std::vector<int64_t> chosen = selected(in[1], w, out[0].shape, select_ge(p));
  const Tensor t = in[0].contiguous();
  Tensor result = Tensor::zeros(t.dtype(), out[0].shape);
  const size_t width = itemsize(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(result.raw());
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i] >= 0) std::memcpy(dst + i * width, src + chosen[i] * width, width);
  return {result};
}

// ---- rules ----------------------------------------------------------------------------

Params window_params(const Window& w, bool dilations) {
  Params p{{"window_dimensions", w.dims}, {"window_strides", w.strides}, {"padding", w.padding}};
  if (dilations) {
    p.set("base_dilation", w.base_dilation);
    p.set("window_dilation", w.window_dilation);
  }
  return p;
}

// Params in the order JAX prints them (by name).
Params by_name(const Params& p) {
  std::map<std::string, ParamValue> sorted(p.items().begin(), p.items().end());
  Params q;
  for (const auto& [k, v] : sorted) q.set(k, v);
  return q;
}

Params with_select(Params p, bool ge) {
  p.set("select_prim", std::string(ge ? "ge" : "le"));
  return by_name(p);
}

// The cotangent of max/min pooling (JAX's transpose of select_and_gather_add):
// the cotangent scattered to each window's selected element; base-dilation
// holes are filled with the identity and sliced away again.
Value scatter_to_selected(const Value& ct, const Value& operand, const Window& w, bool ge) {
  for (int64_t d : w.window_dilation)
    if (d != 1)
      fail<NotImplementedError>("VJP not implemented for select_and_gather (MaxPool) with window dilation, got "
                                "window_dilation=", param_value_str(w.window_dilation), ".");
  const Aval oa = aval_of(operand);
  bool base_dilated = false;
  for (int64_t d : w.base_dilation) base_dilated |= d != 1;
  Value x = operand;
  if (base_dilated) {
    IntLists config;
    for (int64_t d : w.base_dilation) config.push_back({0, 0, d - 1});
    const double fill = ge ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    x = ops::pad(operand, ops::full({}, oa.dtype, fill), config);
  }
  Window plain = w;
  plain.base_dilation = plain.window_dilation = ones(w.ndim());
  Value out = ops::bind1("select_and_scatter_add", {ct, x}, with_select(window_params(plain, false), ge));
  if (base_dilated) {
    const Shape s = aval_of(out).shape;
    out = ops::slice(out, IntList(s.size(), 0), IntList(s.begin(), s.end()), w.base_dilation);
  }
  return out;
}

// reduce_window_sum's transpose (JAX's): the cotangent dilated by the strides,
// padded, and summed over windows strided by the base dilation.
Value sum_transpose(const Value& ct, const Aval& operand, const Window& w) {
  const Shape cs = aval_of(ct).shape;
  IntLists config;
  for (size_t d = 0; d < w.ndim(); ++d) {
    auto dil = [](int64_t n, int64_t k) { return n == 0 ? 0 : 1 + k * (n - 1); };
    const int64_t in = dil(operand.shape[d], w.base_dilation[d]), window = dil(w.dims[d], w.window_dilation[d]);
    const int64_t out = dil(cs[d], w.strides[d]);
    const int64_t before = window - w.padding[d][0] - 1;
    config.push_back({before, in + window - 1 - out - before, w.strides[d] - 1});
  }
  const Value padded = ops::pad(ct, ops::full({}, aval_of(ct).dtype, 0.0), config);
  Window t{w.dims, w.base_dilation, ones(w.ndim()), w.window_dilation, IntLists(w.ndim(), IntList{0, 0})};
  return ops::bind1("reduce_window_sum", {padded}, by_name(window_params(t, true)));
}

// Batching: the vmapped dimension, moved to the front, gets a window of one.
Batched batch_windows(const BatchArgs& a) {
  Window w = window_of(a.params);
  w.dims.insert(w.dims.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.padding.insert(w.padding.begin(), IntList{0, 0});
  w.base_dilation.insert(w.base_dilation.begin(), 1);
  w.window_dilation.insert(w.window_dilation.begin(), 1);
  Params p = a.params;
  const Params widened = window_params(w, a.params.has("base_dilation"));
  for (const auto& [k, v] : widened.items()) p.set(k, v);
  return bind_at_front(a, by_name(p));
}

// A dimension the window leaves alone (size 1, stride 1, no padding or
// dilation) may stay sharded: each device reduces its own block.
bool untouched(const Window& w, size_t d) {
  return w.dims[d] == 1 && w.strides[d] == 1 && w.padding[d][0] == 0 && w.padding[d][1] == 0 &&
         w.base_dilation[d] == 1;
}

Spec keep_untouched(const Spec& s, const Window& w) {
  Spec out(s.size());
  for (size_t d = 0; d < s.size(); ++d)
    if (untouched(w, d)) out[d] = s[d];
  return out;
}

std::optional<LocalPlan> window_plan(const Avals& in, const Params& p, const Avals&) {
  const Window w = window_of(p);
  // Operands are laid out alike (the pooled operand is the last one).
  const Spec s = keep_untouched(spec_of(in.back()), w);
  LocalPlan plan;
  plan.in_specs.assign(in.size(), s);
  plan.params = p;
  plan.out_specs = {s};
  return plan;
}

// Sharding propagation over Auto axes, as the local plan runs it: dimensions
// the window leaves alone pass through every operand to the result.
std::optional<FactorMap> window_factors(const Avals& in, const Params& p, const Avals& out) {
  const Window w = window_of(p);
  FactorMap m = blank_factors(in, out);
  for (size_t d = 0; d < w.ndim(); ++d) {
    if (!untouched(w, d)) continue;
    for (auto& operand : m.in) operand[d] = m.num_factors;
    m.out[0][d] = m.num_factors++;
  }
  return m;
}

Cost window_cost(const Avals& in, const Params& p, const Avals& out) {
  Cost c = memory_cost(in, out);
  const Window w = window_of(p);
  const Shape& windows = in.size() == 2 && !p.has("base_dilation") ? in[0].shape : out[0].shape;
  c.flops = static_cast<double>(num_elements(windows)) * static_cast<double>(num_elements(w.dims));
  return c;
}

void check_number(const char* prim, const Aval& x) {
  if (is_bool(x.dtype))
    fail<TypeError>("operand to ", prim, " must have a number dtype, got bool");
}

void register_reduce_window(const char* name, Monoid m) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.abstract_eval = [name, m](const Avals& in, const Params& params) {
    if (m == Monoid::Sum) check_number(name, in[0]);
    return Avals{like(in[0], window_output_shape(in[0].shape, window_of(params)), in[0].dtype)};
  };
  p.kernel = [m](const Tensors& in, const Params& params, const Avals& out) {
    return reduce_window_kernel(m, in[0], window_of(params), out[0]);
  };
  p.vjp = [m](const VjpArgs& a) {
    const Window w = window_of(a.params);
    if (m == Monoid::Sum) return Cotangents{sum_transpose(*a.ct[0], aval_of(a.in[0]), w)};
    return Cotangents{scatter_to_selected(*a.ct[0], a.in[0], w, m == Monoid::Max)};
  };
  p.batch = batch_windows;
  p.cost = window_cost;
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    return varying_shape_rule("reduce_window", in[0], out[0].shape);
  };
  p.local_plan = window_plan;
  p.factors = window_factors;
  register_primitive(std::move(p));
}

void register_select_and_scatter_add() {
  Primitive p;
  p.name = "select_and_scatter_add";
  p.operands = exactly(2);
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape out = window_output_shape(in[1].shape, window_of(params));
    if (in[0].shape != out)
      fail<TypeError>("select_and_scatter_add source shape ", shape_str(in[0].shape),
                      " does not match the windows of the operand, ", shape_str(out));
    return Avals{like(in[1], in[1].shape, in[0].dtype)};
  };
  p.kernel = scatter_kernel;
  // Linear in the source; the operand only decides where (no cotangent).
  p.vjp = [](const VjpArgs& a) {
    Cotangents ct(2);
    if (!a.wants[0]) return ct;
    Params q = a.params;
    const Window w = window_of(a.params);
    q.set("base_dilation", ones(w.ndim()));
    q.set("window_dilation", ones(w.ndim()));
    ct[0] = ops::bind1("select_and_gather_add", {*a.ct[0], a.in[1]}, by_name(q));
    return ct;
  };
  p.batch = batch_windows;
  p.cost = window_cost;
  p.sharding_rule = [](const Avals& in, const Params&, const Avals&) { return std::vector<Spec>{spec_of(in[1])}; };
  p.local_plan = window_plan;
  p.factors = window_factors;
  register_primitive(std::move(p));
}

void register_select_and_gather_add() {
  Primitive p;
  p.name = "select_and_gather_add";
  p.operands = exactly(2);
  p.abstract_eval = [](const Avals& in, const Params& params) {
    if (in[0].shape != in[1].shape)
      fail<TypeError>("select_and_gather_add tangents and operand shapes must match, got ", shape_str(in[0].shape),
                      " and ", shape_str(in[1].shape), ".");
    return Avals{like(in[1], window_output_shape(in[1].shape, window_of(params)), in[0].dtype)};
  };
  p.kernel = gather_kernel;
  p.vjp = [](const VjpArgs& a) {
    Cotangents ct(2);
    if (a.wants[0]) ct[0] = scatter_to_selected(*a.ct[0], a.in[1], window_of(a.params), select_ge(a.params));
    return ct;
  };
  p.batch = batch_windows;
  p.cost = window_cost;
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    if (spec_of(in[0]) != spec_of(in[1]))
      fail<ShardingTypeError>("select_and_gather_add tangents and operand shardings must match, got ",
                              type_sharding_repr(in[0]), " and ", type_sharding_repr(in[1]), ".");
    return varying_shape_rule("reduce_window", in[1], out[0].shape);
  };
  p.local_plan = window_plan;
  p.factors = window_factors;
  register_primitive(std::move(p));
}

}  // namespace

void register_window_primitives() {
  register_reduce_window("reduce_window_sum", Monoid::Sum);
  register_reduce_window("reduce_window_max", Monoid::Max);
  register_reduce_window("reduce_window_min", Monoid::Min);
  register_select_and_scatter_add();
  register_select_and_gather_add();
}

}  // namespace meshsim
