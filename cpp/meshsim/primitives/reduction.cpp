// Reductions over axes (reduce_*), argmax/argmin and cumulative scans.
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "meshsim/ir/printing.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/complex_math.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/integer_wrap.h"
#include "meshsim/kernels/ordered_reduce.h"
#include "meshsim/kernels/reduce.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/windows.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/vjp.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

// ---- the combining operations --------------------------------------------

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

// Each op body is written once for scalars and Simd vectors (see reduce.h).
template <class T> struct Sum {
  T identity = T(0);
  template <class V> V operator()(V a, V b) const {
    if constexpr (std::is_integral_v<V>) return add_op(a, b);  // wraps, as XLA's
    else return a + b;
  }
};
template <class T> struct Prod {
  T identity = T(1);
  template <class V> V operator()(V a, V b) const {
    if constexpr (std::is_integral_v<V> || is_complex_v<V>) return mul_op(a, b);
    else return a * b;
  }
};
// Equal operands of different bits (+0 and -0, or a subnormal and a zero,
// equal as XLA's CPU code compares) go to the one with a clear sign bit for
// max and a set one for min, as XLA's maximum/minimum: on the bits, a & b for
// max and a | b for min (which max/min of floats flush afterwards).
template <bool kMax, class V>
V tie_break(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::signbit(a) == kMax ? b : a;
  } else if constexpr (std::is_arithmetic_v<V>) {
    return a;
  } else {
    using E = std::remove_cv_t<std::remove_reference_t<decltype(a[0])>>;
    if constexpr (std::is_floating_point_v<E>) {
      typedef std::conditional_t<sizeof(E) == 4, int32_t, int64_t> Bits __attribute__((vector_size(sizeof(V))));
      return kMax ? (V)((Bits)a & (Bits)b) : (V)((Bits)a | (Bits)b);
    } else {
      return a;
    }
  }
}

// max/min propagate NaN, as XLA does (a != a only for NaN).
template <class T> struct Max {
  static constexpr bool kAnyOrder = true;  // up to which NaN (kernels/reduce.h)
  T identity = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::lowest();
  template <class V> V operator()(V a, V b) const {
    const V chosen = (a > b) | (a != a) ? a : b;
    return a == b ? tie_break<true>(a, b) : chosen;
  }
};
template <class T> struct Min {
  static constexpr bool kAnyOrder = true;  // up to which NaN (kernels/reduce.h)
  T identity = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::max();
  template <class V> V operator()(V a, V b) const {
    const V chosen = (a < b) | (a != a) ? a : b;
    return a == b ? tie_break<false>(a, b) : chosen;
  }
};
// Complex max/min: JAX's lexicographic select (complex_math.h) from -inf+0j / inf+0j.
template <class F> struct Max<std::complex<F>> {
  std::complex<F> identity{-std::numeric_limits<F>::infinity(), F(0)};
  std::complex<F> operator()(std::complex<F> a, std::complex<F> b) const { return max_op(a, b); }
};
template <class F> struct Min<std::complex<F>> {
  std::complex<F> identity{std::numeric_limits<F>::infinity(), F(0)};
  std::complex<F> operator()(std::complex<F> a, std::complex<F> b) const { return min_op(a, b); }
};
template <class T> struct And {
  static constexpr bool kAnyOrder = true;
  T identity = static_cast<T>(-1);  // all bits set; true for bool
  template <class V> V operator()(V a, V b) const { return a & b; }
};
template <class T> struct Or {
  static constexpr bool kAnyOrder = true;
  T identity = T(0);
  template <class V> V operator()(V a, V b) const { return a | b; }
};
template <class T> struct Xor {
  static constexpr bool kAnyOrder = true;
  T identity = T(0);
  template <class V> V operator()(V a, V b) const { return a ^ b; }
};

// Which dtypes an op accepts, with JAX's wording when it refuses one.
enum class Accepts { Number, Any, Logical };

void check_dtype(const std::string& name, Accepts a, DType dt) {
  if (a == Accepts::Number && is_bool(dt))
    fail<TypeError>(name, " does not accept dtype ", dtype_name(dt),
                    ". Accepted dtypes are subtypes of number.");
  if (a == Accepts::Logical && is_inexact(dt))
    fail<TypeError>("logical reduction requires operand dtype bool or int, got ", dtype_name(dt), ".");
}

// Complex values reduce (sum, product) or scan (sum) along real axes only.
void check_complex_supported(const std::string& name, DType dt, bool supported) {
  if (is_complex(dt) && !supported)
    fail<NotImplementedError>(name, " of complex values is not supported; reduce their real and "
                              "imaginary parts (jnp.real, jnp.imag).");
}

template <template <class> class Op>
constexpr bool kComplexSum = std::is_same_v<Op<float>, Sum<float>>;
template <template <class> class Op>
constexpr bool kComplexChooser = std::is_same_v<Op<float>, Max<float>> || std::is_same_v<Op<float>, Min<float>>;
// Max and min select an operand, which XLA's maxps/minps read as zero when
// subnormal (core/denormals.h): their float32/float64 results are flushed.
template <template <class> class Op>
void flush_chosen(Tensor& t) {
  if constexpr (kComplexChooser<Op>)
    if (t.dtype() == DType::Float32 || t.dtype() == DType::Float64)
      dispatch_wide_float(t.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* v = t.data<T>();
        for (int64_t i = 0; i < t.size(); ++i) v[i] = flush_subnormal(v[i]);
      });
}

template <template <class> class Op>
constexpr bool kComplexProduct = std::is_same_v<Op<float>, Prod<float>>;
template <template <class> class Op>
constexpr bool kComplexReduce = kComplexSum<Op> || kComplexChooser<Op> || kComplexProduct<Op>;

// The reduced elements of each output folded one by one in row-major order
// from the identity, as XLA's CPU loop runs a reduction it cannot vectorise:
// the order matters for complex max/min, which are not associative with NaNs.
template <class T, class Op>
Tensor fold_in_order(const Tensor& x, const std::vector<bool>& reduced, const Shape& out_shape, const Op& op) {
  std::vector<int64_t> perm;
  int64_t n = 1;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (!reduced[d]) perm.push_back(d);
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (reduced[d]) {
      perm.push_back(d);
      n *= x.shape()[d];
    }
  const Tensor runs = x.transpose(perm).contiguous();
  Tensor result = Tensor::empty(x.dtype(), out_shape);
  const T* src = runs.data<T>();
  T* dst = result.data<T>();
  for (int64_t o = 0; o < result.size(); ++o, src += n) {
    if (n == 1) {  // XLA drops a reduction over one element, identity and all
      dst[o] = src[0];
      continue;
    }
    T acc = op.identity;
    for (int64_t i = 0; i < n; ++i) acc = op(acc, src[i]);
    dst[o] = acc;
  }
  return result;
}

// A complex tensor seen as its real and imaginary parts: a trailing dimension
// of size 2 (no copy). Sums of complex numbers are sums of their parts.
Tensor as_real_pairs(const Tensor& z) {
  Shape shape = z.shape();
  Strides strides;
  for (int64_t s : z.strides()) strides.push_back(2 * s);
  shape.push_back(2);
  strides.push_back(1);
  return Tensor::wrap(z.raw(), real_dtype(z.dtype()), shape, strides, z.storage());
}

// The complex tensor whose parts are the trailing pairs of contiguous `pairs`.
Tensor from_real_pairs(const Tensor& pairs) {
  Shape shape = pairs.shape();
  shape.pop_back();
  return Tensor::wrap(pairs.raw(), complex_dtype(pairs.dtype()), shape, contiguous_strides(shape),
                      pairs.storage());
}

// Instantiates a kernel only for the dtypes its op accepts; narrow floats
// never reach it (see in_compute_dtype).
template <Accepts kAccepts, class F>
decltype(auto) dispatch_accepted(DType dt, F&& f) {
  if constexpr (kAccepts == Accepts::Logical) {
    return dispatch_bitwise(dt, std::forward<F>(f));
  } else {
    if constexpr (kAccepts == Accepts::Any)
      if (is_bool(dt)) return f(bool{});
    return dispatch_wide_numeric(dt, std::forward<F>(f));
  }
}

// Narrow floats (bfloat16, float16, float8) are reduced and scanned in
// float32, and the result rounded once, as XLA on CPU accumulates them;
// four-bit integers in int8/uint8, the result wrapped back (the same sums and
// products modulo 16).
Tensor in_compute_dtype(const Tensor& x) {
  if (is_narrow_float(x.dtype())) return cast(x, DType::Float32);
  if (x.dtype() == DType::Int4) return cast(x, DType::Int8);
  if (x.dtype() == DType::UInt4) return cast(x, DType::UInt8);
  return x;
}

// ---- reduce_* --------------------------------------------------------------

// Sums and products of narrow floats depend on XLA's order and per-step
// rounding (kernels/ordered_reduce.h); max and min do not.
template <template <class> class Op>
constexpr bool kNarrowOrdered = std::is_same_v<Op<float>, Sum<float>> || std::is_same_v<Op<float>, Prod<float>>;

template <template <class> class Op>
Tensor narrow_fold(const Tensor& narrow, const std::vector<bool>& mask, const Aval& out) {
  const Tensor x = cast(narrow, DType::Float32);
  Tensor result = Tensor::empty(DType::Float32, out.shape);
  dispatch_float(narrow.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_small_float_v<T>)
      ordered_reduce(x.data<float>(), x.shape(), x.strides(), mask, Op<float>{}, Op<float>{}.identity,
                     [](float v) { return float(T(v)); }, result.data<float>());
  });
  return cast(result, out.dtype);
}

// XLA on CPU hands float32/float64 sums of this many elements or more to
// YNNPACK, whose blocked order (rows of 16-lane accumulators, tiled over the
// reduced elements) is not reproduced here: those keep the pairwise loops of
// kernels/reduce.h. Smaller sums, and complex sums of any size, run XLA's own
// loops, whose order ordered_reduce follows.
constexpr int64_t kYnnpackSumElements = 4096;

// The sum of float32/float64 elements (any strides) over `mask`, folded in
// XLA's loop order.
template <class T>
Tensor ordered_sum(const Tensor& x, const std::vector<bool>& mask, const Shape& out_shape) {
  Tensor result = Tensor::empty(x.dtype(), out_shape);
  ordered_reduce(x.data<T>(), x.shape(), x.strides(), mask, Sum<T>{}, T(0), [](T v) { return v; }, result.data<T>());
  return result;
}

std::vector<bool> reduced_mask(const Aval& x, const IntList& axes) {
  std::vector<bool> mask(x.ndim(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= x.ndim())
      fail<ValueError>("reduction axes ", param_value_str(axes),
                       " contains out-of-bounds indices for ", x.str_short(), ".");
    if (mask[a]) fail<ValueError>("duplicate value in 'axes' of reduction: ", param_value_str(axes));
    mask[a] = true;
  }
  return mask;
}

// Reductions, arg-reductions and scans: one flop per input element.
Cost one_flop_per_input(const Avals& in, const Params&, const Avals& out) {
  Cost c = memory_cost(in, out);
  c.flops = static_cast<double>(num_elements(in[0].shape));
  return c;
}

// Axes batch_over_axes shifted print as np.int64, as JAX's reducer batching leaves them.
void spell_numpy_axes(PrintedEquation& e) {
  if (e.eqn.params.has("numpy_dims"))
    e.spell("axes", numpy_tuple_str(e.eqn.params.get<IntList>("axes"), &e.eqn.params.get<IntList>("numpy_dims")));
}

// Reductions over `axes` and scans along `axis` batch at dimension 0.
Batched batch_over_axes(const BatchArgs& a) {
  Params params = a.params;
  params.set("axes", shift_axes(a.params.get<IntList>("axes")));
  // JAX shifts the axes with np.where: its jaxprs print them as np.int64 (ir/program.cpp).
  params.set("numpy_dims", IntList(params.get<IntList>("axes").size(), 1));
  if (auto os = spec_param(a.params, "out_sharding")) {  // the batch dim is whole
    os->insert(os->begin(), AxisNames{});
    params.set("out_sharding", std::vector<StrList>(*os));
  }
  return bind_at_front(a, params);
}

Batched batch_along_axis(const BatchArgs& a) {
  Params params = a.params;
  params.set("axis", a.params.get<int64_t>("axis") + 1);
  return bind_at_front(a, params);
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

std::vector<Spec> reduce_rule(const Avals& in, const Params& p, const Avals&) {
  const IntList& axes = p.get<IntList>("axes");
  if (auto os = out_sharding_param(p, in[0].shape.size() - axes.size())) return {*os};
  return {drop_dims(spec_of(in[0]), axes)};
}

// Reducing a sharded dimension: each device reduces its block, then the
// partial results are all-reduced across the dimension's mesh axes (`op`
// empty: not associative here, so the dimension is all-gathered first).
PlanRule reduce_plan(
    std::string op) {
  return [op](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    const IntList& axes = p.get<IntList>("axes");
    Spec s = spec_of(in[0]);
    LocalPlan plan;
    for (int64_t a : axes) {
      if (op.empty()) s[a].clear();
      else plan.reduce_axes.insert(plan.reduce_axes.end(), s[a].begin(), s[a].end());
    }
    plan.reduce_op = op.empty() ? "sum" : op;
    plan.in_specs = {s};
    plan.params = p;
    // The blocks' own layout: the result's type (chosen by sharding
    // propagation, or out_sharding) may split it otherwise; run_local reshards.
    plan.out_specs = {drop_dims(s, axes)};
    return plan;
  };
}

template <template <class> class Op, Accepts kAccepts>
// `partials`: how blocks' partial results combine across a sharded reduced
// dimension, as XLA all-reduces them ("" when not associative here). No
// collective multiplies (JAX has no pprod), so a product's reduced dimension
// is gathered first here.
void reduce(const std::string& name, const std::string& partials,
            std::function<Cotangents(const VjpArgs&)> vjp = nullptr,
            std::function<void(PrintedEquation&)> print_rule = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.print_rule = [print_rule = std::move(print_rule)](PrintedEquation& e) {
    spell_numpy_axes(e);
    if (print_rule) print_rule(e);
  };
  p.partials_reduction = partials;
  p.fuses_operands = true;  // XLA fuses the operand it reduces
  const std::string combined = partials == "prod" ? "" : partials;
  p.sharding_rule = reduce_rule;
  p.local_plan = reduce_plan(combined);
  p.factors = reduced_axes_factors(!combined.empty());
  p.cost = one_flop_per_input;
  p.batch = batch_over_axes;
  p.vjp = std::move(vjp);
  // A sum of partial sums is the partial sum of the sum: the result stays unreduced.
  if (partials == "sum") p.ur_rule = keep_operand_ur();
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    check_dtype(name, kAccepts, x.dtype);
    check_complex_supported(name, x.dtype, kComplexReduce<Op>);
    std::vector<bool> mask = reduced_mask(x, params.get<IntList>("axes"));
    Shape out;
    for (int64_t d = 0; d < x.ndim(); ++d)
      if (!mask[d]) out.push_back(x.shape[d]);
    return Avals{like(x, out, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const IntList& axes = params.get<IntList>("axes");
    int64_t reduced = 1;
    for (int64_t ax : axes) reduced *= in[0].shape()[ax];
    // XLA drops a reduction over one element: no identity is folded in, nothing is flushed.
    if (reduced == 1 && in[0].size() > 0) return as_tensors(in[0].reshape(out[0].shape));
    std::vector<bool> mask(in[0].ndim(), false);
    for (int64_t ax : axes) mask[ax] = true;
    if constexpr (kComplexSum<Op>) {
      if (is_complex(in[0].dtype())) {
        Shape pair_shape = out[0].shape;
        pair_shape.push_back(2);
        mask.push_back(false);
        Tensor pairs = dispatch_wide_float(real_dtype(in[0].dtype()), [&](auto tag) {
          return ordered_sum<decltype(tag)>(as_real_pairs(in[0]), mask, pair_shape);
        });
        return as_tensors(from_real_pairs(pairs));
      }
    }
    if constexpr (kComplexChooser<Op>)
      if (is_complex(in[0].dtype()))
        return as_tensors(dispatch_complex(in[0].dtype(), [&](auto tag) {
          return fold_in_order<decltype(tag)>(in[0], mask, out[0].shape, Op<decltype(tag)>{});
        }));
    if constexpr (kNarrowOrdered<Op>)
      if (is_narrow_float(in[0].dtype())) return as_tensors(narrow_fold<Op>(in[0], mask, out[0]));
    if constexpr (kComplexSum<Op>) {
      const DType dt = in[0].dtype();
      if ((dt == DType::Float32 || dt == DType::Float64) && in[0].size() < kYnnpackSumElements)
        return as_tensors(dispatch_wide_float(dt, [&](auto tag) {
          return ordered_sum<decltype(tag)>(in[0], mask, out[0].shape);
        }));
    }
    const Tensor x = in_compute_dtype(in[0]);
    Tensor result = Tensor::empty(x.dtype(), out[0].shape);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      reduce_into<T>(x, mask, result, Op<T>{});
    };
    if constexpr (kComplexReduce<Op>)
      if (is_complex(x.dtype())) {
        dispatch_complex(x.dtype(), run);
        return as_tensors(std::move(result));
      }
    dispatch_accepted<kAccepts>(x.dtype(), run);
    flush_chosen<Op>(result);
    return as_tensors(cast(std::move(result), out[0].dtype));
  };
  register_primitive(std::move(p));
}

// ---- argmax / argmin -------------------------------------------------------

// Whether v replaces the current best b: strictly better, or the first NaN.
template <class T, bool kMax>
bool better(T v, T b) {
  if (is_nan(b)) return false;
  return is_nan(v) || (kMax ? v > b : v < b);
}

// The winning index of a contiguous row: its extremum (NaN if it holds one)
// by a vectorised reduction, then the first occurrence of that value.
template <class T, bool kMax>
int64_t arg_reduce_row(const T* row, int64_t n) {
  using Op = std::conditional_t<kMax, Max<T>, Min<T>>;
  const T best = reduce_detail::reduce_run<true>(row, n, 1, Op{});
  int64_t i = 0;
  if (is_nan(best)) while (!is_nan(row[i])) ++i;
  else while (row[i] != best) ++i;
  return i;
}

// x viewed as [outer, n, inner] (contiguous); writes the winning index along n.
template <class T, bool kMax, class I>
void arg_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, I* out) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) out[o] = static_cast<I>(arg_reduce_row<T, kMax>(x + o * n, n));
    return;
  }
  std::vector<T> best(inner);
  for (int64_t o = 0; o < outer; ++o, x += n * inner, out += inner) {
    std::copy(x, x + inner, best.begin());
    std::fill(out, out + inner, I(0));
    for (int64_t r = 1; r < n; ++r)
      for (int64_t j = 0; j < inner; ++j)
        if (better<T, kMax>(x[r * inner + j], best[j])) {
          best[j] = x[r * inner + j];
          out[j] = static_cast<I>(r);
        }
  }
}

struct Blocks {
  int64_t outer = 1, n = 1, inner = 1;
};

Blocks blocks_around(const Shape& shape, int64_t axis) {
  Blocks b;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < axis ? b.outer : d == axis ? b.n : b.inner) *= shape[d];
  return b;
}

template <bool kMax>
void arg_reduce_primitive(const std::string& name) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.sharding_rule = reduce_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) {
    return gather_dims_plan(in, p, out, p.get<IntList>("axes"));
  };
  p.factors = reduced_axes_factors(false);
  p.partials_reduction = kMax ? "max" : "min";  // XLA all-reduces (value, index) pairs
  p.fuses_operands = true;
  p.cost = one_flop_per_input;
  p.batch = batch_over_axes;
  p.print_rule = spell_numpy_axes;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    const IntList& axes = params.get<IntList>("axes");
    DType index_dtype = params.get<DType>("index_dtype");
    if (!is_integer(index_dtype))
      fail<TypeError>("index_dtype must be an integer type, but got ", dtype_name(index_dtype));
    if (axes.size() != 1) fail<ValueError>("argmin and argmax take exactly one axis, got ", param_value_str(axes));
    const int64_t axis = axes[0];
    if (axis < 0 || axis >= x.ndim())
      fail<ValueError>("Invalid axis ", axis, " for operand shape ", shape_str(x.shape));
    if (x.shape[axis] == 0)
      fail<ValueError>("argmin and argmax require non-empty reduced dimension. operand.shape=",
                       shape_str(x.shape), " axis=", axis);
    Shape out = x.shape;
    out.erase(out.begin() + axis);
    return Avals{like(x, out, index_dtype)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    // JAX lowers argmax/argmin to comparisons that refuse complex operands.
    if (is_complex(in[0].dtype()))
      fail<TypeError>(kMax ? "gt" : "lt", " does not accept dtype ", dtype_name(in[0].dtype()),
                      " at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.");
    const Tensor x = in_compute_dtype(in[0]).contiguous();  // exact: the order is kept
    const Blocks b = blocks_around(x.shape(), params.get<IntList>("axes")[0]);
    // Indices are computed as int32 or int64; a narrower index dtype is a cast.
    const DType index_dtype = out[0].dtype == DType::Int32 ? DType::Int32 : DType::Int64;
    Tensor result = Tensor::empty(index_dtype, out[0].shape);
    dispatch_accepted<Accepts::Any>(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto run = [&](auto* indices) { arg_reduce<T, kMax>(x.data<T>(), b.outer, b.n, b.inner, indices); };
      if (index_dtype == DType::Int32) run(result.data<int32_t>());
      else run(result.data<int64_t>());
    });
    return as_tensors(cast(std::move(result), out[0].dtype));
  };
  register_primitive(std::move(p));
}

// ---- cumulative scans ------------------------------------------------------

// In-place inclusive scan of x viewed as [outer, n, inner] along n.
// The first element is folded from the identity too, as XLA's reduce_window
// does (-0 + 0 is +0; a subnormal is flushed).
template <class T, class Op>
void scan(T* x, const Blocks& b, bool reverse, const Op& op) {
  const int64_t step = reverse ? -b.inner : b.inner;
  for (int64_t o = 0; o < b.outer; ++o) {
    T* first = x + o * b.n * b.inner + (reverse ? (b.n - 1) * b.inner : 0);
    if constexpr (std::is_floating_point_v<T>)
      for (int64_t j = 0; j < b.inner; ++j)  // flushed explicitly: 1 * x folds away at compile time
        first[j] = flush_subnormal(op(op.identity, first[j]));
    if (b.inner == 1) {
      T acc = first[0];  // carried in a register, not reloaded from the store
      for (int64_t r = 1; r < b.n; ++r) first[r * step] = acc = op(acc, first[r * step]);
    } else {
      for (int64_t r = 1; r < b.n; ++r) combine(first + r * step, first + (r - 1) * step, b.inner, op);
    }
  }
}

// The scan as XLA's reduce_window computes it, for ops whose result depends
// on the order (complex max/min): each window folded from the identity in
// increasing index order, operands (acc, next). Forward windows are prefixes,
// one pass; reverse windows are suffixes, each folded anew (quadratic in the
// scanned length).
template <class T, class Op>
void scan_from_identity(T* x, const Blocks& b, bool reverse, const Op& op) {
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t j = 0; j < b.inner; ++j) {
      T* lane = x + o * b.n * b.inner + j;
      const int64_t s = b.inner;
      if (!reverse) {
        T acc = op.identity;
        for (int64_t r = 0; r < b.n; ++r) lane[r * s] = acc = op(acc, lane[r * s]);
        continue;
      }
      for (int64_t r = 0; r < b.n; ++r) {  // lane[r] is read only by windows starting at or before r
        T acc = op.identity;
        for (int64_t k = r; k < b.n; ++k) acc = op(acc, lane[k * s]);
        lane[r * s] = acc;
      }
    }
}

template <template <class> class Op>
void cumulative(const std::string& name, std::function<Cotangents(const VjpArgs&)> vjp = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.sharding_rule = unsharded_dim_rule("axis", false);
  // On blocks only with the scanned dim whole (each device's scan would
  // start from zero otherwise).
  p.local_plan = as_is_plan([](const Avals& in, const Params& p, const Avals&) {
    return spec_of(in[0])[p.get<int64_t>("axis")].empty();
  });
  p.factors = whole_dims_factors("axis", true);
  p.unmapped_dims_keep_sharding = true;  // the scanned dim keeps its sharding, scanned whole
  p.fuses_operands = true;  // XLA fuses the operand it scans
  p.cost = one_flop_per_input;
  p.batch = batch_along_axis;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    check_dtype(name, Accepts::Number, x.dtype);
    check_complex_supported(name, x.dtype, kComplexSum<Op> || kComplexChooser<Op> || kComplexProduct<Op>);
    const int64_t axis = params.get<int64_t>("axis");
    if (axis < 0 && x.ndim() > 0) fail<ValueError>("XLA operations do not allow negative axes");
    if (axis < 0 || axis >= x.ndim())
      fail<ValueError>("axis ", axis, " is out of bounds for array of shape ", shape_str(x.shape));
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    if constexpr (kComplexSum<Op>) {
      if (is_complex(in[0].dtype())) {  // the parts' sums, along the same axis
        Tensor pairs = as_real_pairs(in[0]).copy();
        const Blocks b = blocks_around(pairs.shape(), params.get<int64_t>("axis"));
        dispatch_wide_float(pairs.dtype(), [&](auto tag) {
          using T = decltype(tag);
          scan(pairs.data<T>(), b, params.get_or<bool>("reverse", false), Op<T>{});
        });
        return as_tensors(from_real_pairs(pairs));
      }
    }
    if constexpr (kComplexProduct<Op>) {
      if (is_complex(in[0].dtype())) {  // complex products, one after another along the axis
        Tensor result = in[0].copy();
        const Blocks b = blocks_around(result.shape(), params.get<int64_t>("axis"));
        dispatch_complex(result.dtype(), [&](auto tag) {
          using T = decltype(tag);
          scan(result.data<T>(), b, params.get_or<bool>("reverse", false), Op<T>{});
        });
        return as_tensors(std::move(result));
      }
    }
    if constexpr (kComplexChooser<Op>) {
      if (is_complex(in[0].dtype())) {  // in order along the axis, as reduce_window runs
        Tensor result = in[0].copy();
        const Blocks b = blocks_around(result.shape(), params.get<int64_t>("axis"));
        dispatch_complex(result.dtype(), [&](auto tag) {
          using T = decltype(tag);
          scan_from_identity(result.data<T>(), b, params.get_or<bool>("reverse", false), Op<T>{});
        });
        return as_tensors(std::move(result));
      }
    }
    Tensor result = in_compute_dtype(in[0]).copy();
    const Blocks b = blocks_around(result.shape(), params.get<int64_t>("axis"));
    dispatch_wide_numeric(result.dtype(), [&](auto tag) {
      using T = decltype(tag);
      scan(result.data<T>(), b, params.get_or<bool>("reverse", false), Op<T>{});
    });
    flush_chosen<Op>(result);
    return as_tensors(cast(std::move(result), in[0].dtype()));
  };
  register_primitive(std::move(p));
}

// ---------------------------------------------------------------------------
// VJP rules.

// The dimensions a reduction over `axes` keeps, as broadcast_dimensions.
IntList kept_dims(int64_t ndim, const IntList& axes) {
  IntList kept;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  return kept;
}

// As JAX transposes it: broadcast back, laid out as the operand where its type
// has Explicit axes.
Cotangents reduce_sum_vjp(const VjpArgs& a) {
  const Aval& x = aval_of(a.in[0]);
  const IntList kept = kept_dims(x.ndim(), a.params.get<IntList>("axes"));
  const std::optional<Spec> spec = cotangent_out_sharding(x);
  if (!spec || aval_of(*a.ct[0]).shape == x.shape) return {ops::broadcast_in_dim(*a.ct[0], x.shape, kept)};
  return {ops::bind1("broadcast_in_dim", {*a.ct[0]}, {{"shape", IntList(x.shape)}, {"broadcast_dimensions", kept},
                                                      {"out_sharding", std::vector<StrList>(*spec)}})};
}

// reduce_max/min: g shared evenly among the elements equal to the result.
Cotangents reduce_chooser_vjp(const VjpArgs& a) {
  const Aval& x = aval_of(a.in[0]);
  const IntList& axes = a.params.get<IntList>("axes");
  const IntList kept = kept_dims(x.ndim(), axes);
  const Value hit = ops::convert(ops::eq(a.in[0], ops::broadcast_in_dim(a.out[0], x.shape, kept)), x.dtype);
  const Value share = ops::div(*a.ct[0], ops::reduce_sum(hit, axes));
  return {ops::mul(ops::broadcast_in_dim(share, x.shape, kept), hit)};
}

// reduce_prod without dividing by the operand (exact at zeros, as JAX): the
// product of all other elements is that of those before times those after.
Cotangents reduce_prod_vjp(const VjpArgs& a) {
  const Aval& x = aval_of(a.in[0]);
  const IntList& axes = a.params.get<IntList>("axes");
  const IntList kept = kept_dims(x.ndim(), axes);
  IntList perm = kept;
  perm.insert(perm.end(), axes.begin(), axes.end());
  int64_t rows = 1, n = 1;
  Shape moved;
  for (int64_t d : perm) moved.push_back(x.shape[d]);
  for (int64_t d : kept) rows *= x.shape[d];
  for (int64_t d : axes) n *= x.shape[d];
  if (n == 0) return {ops::zeros_like(a.in[0])};
  const Value m = ops::reshape(ops::transpose(a.in[0], perm), {rows, n});
  const Value ones = ops::full({rows, 1}, x.dtype, 1.0);
  const Value before = ops::concatenate({ones, ops::slice_in_dim(ops::cumprod(m, 1, false), 0, n - 1, 1)}, 1);
  const Value after = ops::concatenate({ops::slice_in_dim(ops::cumprod(m, 1, true), 1, n, 1), ones}, 1);
  const Value g = ops::broadcast_in_dim(ops::reshape(*a.ct[0], {rows}), {rows, n}, {0});
  const Value ct = ops::reshape(ops::mul(g, ops::mul(before, after)), moved);
  IntList inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {ops::transpose(ct, inverse)};
}

Cotangents cumsum_vjp(const VjpArgs& a) {
  return {ops::cumsum(*a.ct[0], a.params.get<int64_t>("axis"), !a.params.get_or<bool>("reverse", false))};
}

// cumprod/cummax/cummin: the scan rewritten as ceil(log2 n) shifted combines
// (Hillis-Steele), whose VJP is that of its ops: exact at zeros for cumprod,
// ties of cummax/cummin shared as lax.max/min share them.
Value scan_by_ops(const Value& x, int64_t axis, bool reverse, Value (*combine)(const Value&, const Value&),
                  double identity) {
  const Aval a = aval_of(x);
  const int64_t n = a.shape[axis];
  Value y = reverse ? ops::rev(x, {axis}) : x;
  for (int64_t k = 1; k < n; k *= 2) {
    Shape pad_shape = a.shape;
    pad_shape[axis] = k;
    const Value shifted = ops::concatenate({ops::full(pad_shape, a.dtype, identity), ops::slice_in_dim(y, 0, n - k, axis)},
                                           axis);
    y = combine(y, shifted);
  }
  return reverse ? ops::rev(y, {axis}) : y;
}

std::function<Cotangents(const VjpArgs&)> scan_vjp(Value (*combine)(const Value&, const Value&), double identity) {
  return [combine, identity](const VjpArgs& a) {
    const int64_t axis = a.params.get<int64_t>("axis");
    const bool reverse = a.params.get_or<bool>("reverse", false);
    ProgramPtr scan;
    {
      TracePtr trace = push_trace();
      try {
        const Value y = scan_by_ops(trace->new_input(aval_of(a.in[0])), axis, reverse, combine, identity);
        scan = trace->finish({y});
      } catch (...) {
        pop_trace(trace);
        throw;
      }
      pop_trace(trace);
    }
    return linearize(*scan, {a.in[0]}, {true}).backward({a.ct[0]});
  };
}

}  // namespace

void register_reduction_primitives() {
  // `out_sharding`, when given (transposes under Explicit axes), prints as the
  // result's NamedSharding; JAX's None otherwise.
  reduce<Sum, Accepts::Number>("reduce_sum", "sum", reduce_sum_vjp, [](PrintedEquation& e) {
    const ParamValue* asked = e.find("out_sharding");
    if (asked && !std::holds_alternative<std::monostate>(*asked))
      e.spell("out_sharding", type_sharding_repr(e.program.avals[e.eqn.outputs[0]]));
    e.add("out_sharding");
  });
  reduce<Prod, Accepts::Number>("reduce_prod", "prod", reduce_prod_vjp);
  reduce<Max, Accepts::Any>("reduce_max", "max", reduce_chooser_vjp);
  reduce<Min, Accepts::Any>("reduce_min", "min", reduce_chooser_vjp);
  reduce<And, Accepts::Logical>("reduce_and", "min");
  reduce<Or, Accepts::Logical>("reduce_or", "max");
  reduce<Xor, Accepts::Logical>("reduce_xor", "");

  arg_reduce_primitive<true>("argmax");
  arg_reduce_primitive<false>("argmin");

  cumulative<Sum>("cumsum", cumsum_vjp);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  cumulative<Prod>("cumprod", scan_vjp(ops::mul, 1.0));
  cumulative<Max>("cummax", scan_vjp(ops::max, -kInf));
  cumulative<Min>("cummin", scan_vjp(ops::min, kInf));
  register_window_primitives();
}

}  // namespace meshsim
