// The elementwise families' shared machinery: dtype acceptance with JAX's
// error texts, VJP helpers, and one registration template per op family
// (unary, unary in SIMD batches, predicate, binary, comparison). A family's
// kernel is instantiated per accepted dtype; narrow floats compute in float32
// (compute_type_t) and round back to nearest even, four-bit integers in int8,
// complex numbers as std::complex with XLA's formulas (complex_math.h).
#pragma once
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/elementwise.h"
#include "meshsim/kernels/narrow_float_blocks.h"
#include "meshsim/kernels/xla_math.h"
#include "meshsim/ir/kernel_results.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"

namespace meshsim::elementwise {

// ---------------------------------------------------------------------------
// Dtype acceptance, worded as JAX's errors.

// Numeric: integers and floats; Number: also complex; Inexact: floats and
// complex; Ordered: everything but complex (comparisons other than eq/ne).
enum class Accepts { Float, Inexact, Numeric, Number, SignedNumber, Integer, Bitwise, Ordered, Any };

inline bool accepts(Accepts a, DType dt) {
  switch (a) {
    case Accepts::Float: return is_floating(dt);
    case Accepts::Inexact: return is_inexact(dt);
    case Accepts::Numeric: return !is_bool(dt) && !is_complex(dt);
    case Accepts::Number: return !is_bool(dt);
    case Accepts::SignedNumber: return is_inexact(dt) || is_signed_int(dt);
    case Accepts::Integer: return is_integer(dt);
    case Accepts::Bitwise: return is_bool(dt) || is_integer(dt);
    case Accepts::Ordered: return !is_complex(dt);
    case Accepts::Any: return true;
  }
  return false;
}

inline const char* accepted_kinds(Accepts a) {
  switch (a) {
    case Accepts::Float: return "floating";
    case Accepts::Inexact: return "floating, complexfloating";
    case Accepts::Numeric: return "integer, floating";
    case Accepts::Number: return "integer, floating, complexfloating";
    case Accepts::SignedNumber: return "floating, complexfloating, signedinteger";
    case Accepts::Integer: return "integer";
    case Accepts::Bitwise: return "integer, bool";
    case Accepts::Ordered: return "integer, floating, bool";
    case Accepts::Any: return "any";
  }
  return "";
}

// `f` called with the unsigned integer type of a signed integer's width: for
// ops that read integers as bit patterns (and, or, xor, not, equality), whose
// signed results are the unsigned ones' bits, so each is compiled once per width.
template <class F>
auto on_unsigned_bits(F&& f) {
  return [&f](auto tag) -> decltype(auto) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return f(std::make_unsigned_t<T>{});
    else return f(tag);
  };
}

// Dispatch limited to the accepted dtypes, so each op is instantiated only
// where it means something (SignedNumber reuses Number: the unsigned
// instantiations are never reached; Bitwise ops compute signed integers as
// unsigned ones). Four-bit integers never get here: the kernels widen them
// first (widened).
template <Accepts A, class F>
decltype(auto) dispatch_accepted(DType dt, F&& f) {
  if constexpr (A == Accepts::Float) return dispatch_float(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Inexact) return dispatch_inexact(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Numeric) return dispatch_numeric(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Number || A == Accepts::SignedNumber)
    return dispatch_number(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Integer) return dispatch_integer(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Bitwise) return dispatch_bitwise(dt, on_unsigned_bits(f));
  else {
    if (is_complex(dt)) return dispatch_complex(dt, std::forward<F>(f));
    return dispatch_dtype(dt, std::forward<F>(f));
  }
}

// The dtype a family's kernel computes a storage type in: int4 / uint4 in int8 /
// uint8 (the results narrowed back, wrapping, as XLA on CPU computes four-bit
// integers), the float8 formats in float32 (each element is computed in float32
// and rounded once to its format anyway, so the float32 kernel's values rounded
// back are the same bits). Widening first compiles each op for seven fewer dtypes.
inline bool computed_widened(DType dt) { return is_int4(dt) || is_float8(dt); }
inline DType widened_dtype(DType dt) {
  if (is_float8(dt)) return DType::Float32;
  return dt == DType::Int4 ? DType::Int8 : dt == DType::UInt4 ? DType::UInt8 : dt;
}

// Runs `kernel` on the operands widened (widened_dtype) and converts its
// results back to `out`'s dtypes.
template <class Kernel>
Tensors widened(const Tensors& in, const Avals& out, Kernel&& kernel) {
  Tensors win;
  for (const Tensor& t : in) win.push_back(cast(t, widened_dtype(t.dtype())));
  Avals wout = out;
  for (Aval& a : wout) a.dtype = widened_dtype(a.dtype);
  Tensors r = kernel(win, wout);
  for (size_t i = 0; i < r.size(); ++i) r[i] = cast(r[i], out[i].dtype);
  return r;
}

// `f` for a dtype dispatch that does not compile it for the float8 formats,
// which reach the families' kernels widened.
template <class F>
auto except_float8(F&& f) {
  return [&f](auto tag) -> Tensors {
    using T = decltype(tag);
    if constexpr (is_small_float_v<T> && sizeof(T) == 1) return {};  // not reached: widened first
    else return f(tag);
  };
}

template <class F>
decltype(auto) dispatch_int4(DType dt, F&& f) {
  if (dt == DType::Int4) return f(int4{});
  return f(uint4{});
}

// `position` is the operand index for n-ary ops, -1 for unary ones.
inline void check_dtype(const std::string& name, Accepts a, DType dt, int position = -1) {
  if (accepts(a, dt)) return;
  if (position < 0)
    fail<TypeError>(name, " does not accept dtype ", dtype_name(dt), ". Accepted dtypes are subtypes of ",
                    accepted_kinds(a), ".");
  fail<TypeError>(name, " does not accept dtype ", dtype_name(dt), " at position ", position,
                  ". Accepted dtypes at position ", position, " are subtypes of ", accepted_kinds(a), ".");
}

template <class... Avals>
void check_same_dtypes(const std::string& name, const Avals&... in) {
  const DType first = std::get<0>(std::tie(in...)).dtype;
  if (((in.dtype == first) && ...)) return;
  std::string got;
  ((got += (got.empty() ? "" : ", ") + std::string(dtype_name(in.dtype))), ...);
  fail<TypeError>("lax.", name, " requires arguments to have the same dtypes, got ", got, ".");
}

// ---------------------------------------------------------------------------
// VJP rules, written with ops (g: the output's cotangent).

using VjpRule = std::function<Cotangents(const VjpArgs&)>;
namespace op = meshsim::ops;

// A unary rule from d(g, x, y) with y the output.
template <class D>
VjpRule d1(D d) {
  return [d](const VjpArgs& a) { return Cotangents{d(*a.ct[0], a.in[0], a.out[0])}; };
}

// An operand's cotangent from one shaped as the result, as JAX transposes an
// implicit broadcast: summed over the dims the operand broadcast (all of a
// scalar's, each size-1 dim beside a larger one), then reshaped to the operand
// (laid out as the operand where its type has Explicit axes).
inline Value unbroadcast(const Value& ct, const Value& operand) {
  const Aval& primal = aval_of(operand);
  const Shape &from = aval_of(ct).shape, &to = primal.shape;
  if (from == to) return ct;
  IntList summed;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d)
    if (to.empty() || to[d] != from[d]) summed.push_back(d);
  const Value sum = op::reduce_sum(ct, summed);
  if (to.empty()) return sum;
  Params params{{"new_sizes", IntList(to)}};
  if (auto spec = cotangent_out_sharding(primal)) params.set("out_sharding", std::vector<StrList>(*spec));
  return op::bind1("reshape", {sum}, params);
}

// A binary rule from the two partial cotangents dx(g, x, y, z), dy(g, x, y, z), z the output.
// A scalar operand's cotangent sums its broadcast result's. JAX transposes the two linear
// terms of a binary rule last first, so y's cotangent is computed (and recorded) before x's.
template <class Dx, class Dy>
VjpRule d2(Dx dx, Dy dy) {
  return [dx, dy](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[0], &y = a.in[1], &z = a.out[0];
    Cotangents ct(2);
    if (a.wants[1]) ct[1] = unbroadcast(dy(g, x, y, z), y);
    if (a.wants[0]) ct[0] = unbroadcast(dx(g, x, y, z), x);
    return ct;
  };
}

// Piecewise-constant functions (sign, floor, round, ...): zero cotangent.
inline Cotangents zero_vjp(const VjpArgs& a) { return Cotangents(a.in.size()); }

// `v` shaped and laid out as `like`, for selects.
inline Value c(const Value& like, double v) { return op::full_like(like, v); }
// `v` as a scalar of `like`'s dtype for arithmetic with it, as JAX's rules
// write their constants (a literal in the printed program, saved as nothing).
inline Value lit(const Value& like, double v) {
  const Aval a = aval_of(like);
  return vary_over(op::full({}, a.dtype, v), a.vma);
}

// 1 where x is the result z of max/min, 0.5 where y is too (JAX splits ties
// evenly); shaped as z, since x or y may be a scalar.
inline Value balanced_eq(const Value& x, const Value& z, const Value& y) {
  return op::select(op::eq(x, z), op::select(op::eq(y, z), c(z, 0.5), c(z, 1.0)), c(z, 0.0));
}

inline Value replace_zero(const Value& x) { return op::select(op::eq(x, c(x, 0.0)), c(x, 1.0), x); }

constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kLn2 = 0.6931471805599453;

// ---------------------------------------------------------------------------
// Families of primitives.

inline Avals same_type_as_input(const std::string& name, Accepts a, const Avals& in) {
  check_dtype(name, a, in[0].dtype);
  return Avals{like(in[0], in[0].shape, in[0].dtype, in[0].weak_type)};
}

// Whether a family accepting `a` has float32 kernels (and so a fusion tile).
constexpr bool accepts_float32(Accepts a) { return a != Accepts::Integer && a != Accepts::Bitwise; }
// Whether it has int32 kernels (and so a scalar op for runs of 0-d equations, runtime/scalar_runs.h).
constexpr bool accepts_int32(Accepts a) { return a != Accepts::Float && a != Accepts::Inexact; }

// An element of a unary / binary family's map on T: computed in T's compute
// type, denormals flushed where the op is float arithmetic (kFlush). The
// kernels and their fusion tiles (runtime/fusion.h) share these.
template <class T, bool kFlush, class Op>
auto unary_element(const Op& op) {
  return [&op](T x) {
    using C = compute_type_t<T>;
    if constexpr (kFlush) return from_compute<T>(static_cast<C>(op(to_compute(x))));
    else return static_cast<T>(op(C(x)));
  };
}

template <class T, bool kFlush, class Op>
auto binary_element(const Op& op) {
  return [&op](T x, T y) {
    using C = compute_type_t<T>;
    if constexpr (kFlush) return from_compute<T>(static_cast<C>(op(to_compute(x), to_compute(y))));
    else return static_cast<T>(op(C(x), C(y)));
  };
}

// Op is a generic functor: template <class T> T operator()(T) const.
// kFlush: the op is float arithmetic, which XLA runs with denormals flushed
// (see to_compute); sign and rounding operations are not.
// Nibble (optional): the op on a four-bit pattern, for ops whose int4/uint4
// result is not the int8/uint8 one narrowed (shifts, leading zeros):
// int nibble(int bits, bool is_signed) -> bits.
template <Accepts A, bool kFlush = (A == Accepts::Float || A == Accepts::Inexact), class Op,
          class Nibble = std::nullptr_t>
Primitive unary_primitive(const std::string& name, Op op, VjpRule vjp = nullptr, Nibble nibble = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.elementwise = true;
  const auto* rule = vjp.template target<Cotangents (*)(const VjpArgs&)>();
  p.zero_derivative = rule && *rule == zero_vjp;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) { return same_type_as_input(name, A, in); };
  p.kernel = [op, nibble](const Tensors& in_, const Params&, const Avals& out_) {
    if constexpr (!std::is_same_v<Nibble, std::nullptr_t>)
      if (is_int4(in_[0].dtype()))
        return as_tensors(dispatch_int4(in_[0].dtype(), [&](auto tag) {
          using T = decltype(tag);
          return map_unary<T, T>(in_[0], out_[0].dtype, [&](T x) { return T(nibble(int(x.bits), T::kIsSigned)); });
        }));
    auto run = [&](const Tensors& in, const Avals& out) {
      return dispatch_accepted<A>(in[0].dtype(), except_float8([&](auto tag) {
        using T = decltype(tag);
        return as_tensors(map_unary<T, T>(in[0], out[0].dtype, unary_element<T, kFlush>(op)));
      }));
    };
    if (computed_widened(in_[0].dtype())) return widened(in_, out_, run);
    return run(in_, out_);
  };
  if constexpr (accepts_float32(A))
    p.float_tile = {1, [op](const float* const* in, float* out, int64_t n) {
      auto element = unary_element<float, kFlush>(op);
      for (int64_t i = 0; i < n; ++i) out[i] = element(in[0][i]);  // map_unary's contiguous loop
    }};
  return p;
}

template <Accepts A, bool kFlush = (A == Accepts::Float || A == Accepts::Inexact), class Op,
          class Nibble = std::nullptr_t>
void unary(const std::string& name, Op op, VjpRule vjp = nullptr, Nibble nibble = nullptr) {
  register_primitive(unary_primitive<A, kFlush>(name, op, std::move(vjp), nibble));
}

// A floating-point unary op computed in SIMD batches: VecOp maps an
// xsimd::batch, ScalarOp a scalar (used where |x| >= vec_limit; see
// map_unary_simd). Both must agree to a few ulp.
// NarrowOp (optional): T narrow(T x) for the narrow float formats, where XLA
// expands the op into steps that each round to the format; a Float16Steps
// for an op XLA computes in steps in float16 alone (its bfloat16 and float8
// elements are the float32 function rounded once).
// LibmOp (optional): float libm(float x), libm's function, which XLA calls for
// the tail of a short rank-1 float32 array (xla_math::libm_tail_start).
// A: the accepted dtypes, Float or Inexact (complex elements take ScalarOp).
template <class F>
struct Float16Steps {
  F steps;
};
template <class F> Float16Steps(F) -> Float16Steps<F>;
template <class Op> constexpr bool is_float16_steps_v = false;
template <class F> constexpr bool is_float16_steps_v<Float16Steps<F>> = true;

template <Accepts A = Accepts::Inexact, class VecOp, class ScalarOp, class NarrowOp = std::nullptr_t,
          class LibmOp = std::nullptr_t>
void unary_simd(const std::string& name, VecOp vec_op, ScalarOp scalar_op, double vec_limit,
                VjpRule vjp, NarrowOp narrow = nullptr, LibmOp libm = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = std::is_same_v<NarrowOp, std::nullptr_t> || is_float16_steps_v<NarrowOp>;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return same_type_as_input(name, A, in);
  };
  p.kernel = [vec_op, scalar_op, vec_limit, narrow, libm](const Tensors& in, const Params&, const Avals& out) {
    if constexpr (!std::is_same_v<LibmOp, std::nullptr_t>) {
      const int64_t tail = xla_math::libm_tail_start(in[0].shape());
      if (in[0].dtype() == DType::Float32 && tail < in[0].size()) {
        Tensor result = map_unary_simd<float>(in[0], vec_op, scalar_op, static_cast<float>(vec_limit));
        const Tensor x = in[0].contiguous();
        for (int64_t i = tail; i < x.size(); ++i) result.data<float>()[i] = libm(x.data<float>()[i]);
        return as_tensors(std::move(result));
      }
    }
    if constexpr (is_float16_steps_v<NarrowOp>) {
      if (in[0].dtype() == DType::Float16)
        return as_tensors(map_unary<float16, float16>(in[0], out[0].dtype, narrow.steps));
    } else if constexpr (!std::is_same_v<NarrowOp, std::nullptr_t>) {
      if (is_narrow_float(in[0].dtype()))
        return dispatch_float(in[0].dtype(), [&](auto tag) {
          using T = decltype(tag);
          if constexpr (is_small_float_v<T>)
            return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [&](T x) { return narrow(x); }));
          else return Tensors{};  // not reached: wide floats take the vector path below
        });
    }
    if constexpr (A == Accepts::Inexact)
      if (is_complex(in[0].dtype()))
        return dispatch_complex(in[0].dtype(), [&](auto tag) {
          using T = decltype(tag);
          return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [&](T x) { return static_cast<T>(scalar_op(x)); }));
        });
    if (is_narrow_float(in[0].dtype()))
      return as_tensors(map_unary_simd_narrow(in[0], vec_op, [&](float x) { return static_cast<float>(scalar_op(x)); },
                                              static_cast<float>(vec_limit)));
    return dispatch_wide_float(in[0].dtype(), [&](auto tag) {
      using C = decltype(tag);
      return as_tensors(map_unary_simd<C>(in[0], vec_op, [&](C x) { return static_cast<C>(scalar_op(x)); },
                                          static_cast<C>(vec_limit)));
    });
  };
  p.float_tile = {1, [vec_op, scalar_op, vec_limit](const float* const* in, float* out, int64_t n) {
    auto scalar = [&](float x) { return static_cast<float>(scalar_op(x)); };
    unary_simd_row(in[0], out, n, vec_op, scalar, static_cast<float>(vec_limit));
  }};
  register_primitive(std::move(p));
}

// A unary test with a boolean result (is_finite).
template <Accepts A, class Op>
void unary_predicate(const std::string& name, Op op) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.elementwise = true;
  p.abstract_eval = [name](const Avals& in, const Params&) {
    check_dtype(name, A, in[0].dtype);
    return Avals{like(in[0], in[0].shape, DType::Bool, in[0].weak_type)};
  };
  p.kernel = [op](const Tensors& in_, const Params&, const Avals& out_) {
    auto run = [&](const Tensors& in, const Avals&) {
      return dispatch_accepted<A>(in[0].dtype(), except_float8([&](auto tag) {
        using T = decltype(tag);
        return as_tensors(map_unary<T, bool>(in[0], DType::Bool,
                                          [&](T x) { return bool(op(compute_type_t<T>(x))); }));
      }));
    };
    if (computed_widened(in_[0].dtype())) return widened(in_, out_, run);
    return run(in_, out_);
  };
  register_primitive(std::move(p));
}

inline void check_same_shapes(const std::string& name, const Aval& x, const Aval& y) {
  if (x.shape != y.shape)
    fail<TypeError>(name, " got incompatible shapes for broadcasting: ", shape_str(x.shape), ", ",
                    shape_str(y.shape), ".");
}

// The result shape of an elementwise op, as JAX's lax broadcasts: a scalar operand
// beside any shape, and among operands of one rank, size-1 dims beside any size
// (the kernels read them with stride 0). Ranks are never promoted here: jnp does that.
inline Shape broadcast_operand_shapes(const std::string& name, const Aval& x, const Aval& y) {
  if (x.ndim() == 0) return y.shape;
  if (y.ndim() == 0 || x.shape == y.shape) return x.shape;
  if (x.ndim() != y.ndim())
    fail<TypeError>(name, ": arrays must have the same number of dimensions, got {",
                    std::min(x.ndim(), y.ndim()), ", ", std::max(x.ndim(), y.ndim()), "}");
  Shape out(x.shape.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (x.shape[d] != y.shape[d] && x.shape[d] != 1 && y.shape[d] != 1) check_same_shapes(name, x, y);
    out[d] = x.shape[d] == 1 ? y.shape[d] : x.shape[d];
  }
  return out;
}

inline Aval binary_aval(const std::string& name, Accepts a, const Avals& in, DType out_dtype) {
  check_dtype(name, a, in[0].dtype, 0);
  check_dtype(name, a, in[1].dtype, 1);
  check_same_dtypes(name, in[0], in[1]);
  const Aval& shaped = in[0].ndim() == 0 ? in[1] : in[0];
  return like(shaped, broadcast_operand_shapes(name, in[0], in[1]), out_dtype, in[0].weak_type && in[1].weak_type);
}

// kFlush as for unary: arithmetic flushes denormals, max/min and bit operations do not.
template <Accepts A, bool kFlush = (A == Accepts::Float || A == Accepts::Inexact || A == Accepts::Numeric ||
                                    A == Accepts::Number),
          class Op, class Nibble = std::nullptr_t>
Primitive binary_primitive(const std::string& name, Op op, VjpRule vjp = nullptr, UrRule ur_rule = nullptr,
                           Nibble nibble = nullptr) {
  Primitive p;
  p.name = name;
  p.operands = exactly(2);
  p.elementwise = true;
  p.vjp = std::move(vjp);
  p.ur_rule = std::move(ur_rule);
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return Avals{binary_aval(name, A, in, in[0].dtype)};
  };
  p.batch = batch_broadcasting;
  p.kernel = [op, nibble](const Tensors& in_, const Params&, const Avals& out_) {
    if constexpr (!std::is_same_v<Nibble, std::nullptr_t>)
      if (is_int4(in_[0].dtype()))
        return as_tensors(dispatch_int4(in_[0].dtype(), [&](auto tag) {
          using T = decltype(tag);
          return map_binary<T, T>(in_[0], in_[1], out_[0].dtype,
                                  [&](T x, T y) { return T(nibble(int(x.bits), int(y.bits), T::kIsSigned)); });
        }));
    auto run = [&](const Tensors& in, const Avals& out) {
      return dispatch_accepted<A>(in[0].dtype(), except_float8([&](auto tag) {
        using T = decltype(tag);
        return as_tensors(map_binary<T, T>(in[0], in[1], out[0].dtype, binary_element<T, kFlush>(op)));
      }));
    };
    if (computed_widened(in_[0].dtype())) return widened(in_, out_, run);
    return run(in_, out_);
  };
  if constexpr (accepts_float32(A))
    p.float_tile = {2, [op](const float* const* in, float* out, int64_t n) {
      auto element = binary_element<float, kFlush>(op);
      binary_row(in[0], 1, in[1], 1, out, n, element);  // map_binary's contiguous path
    }};
  if constexpr (accepts_int32(A))
    p.int_scalar_op = {2, /*selection=*/false, [op](const int32_t* in, int) {
      return binary_element<int32_t, kFlush>(op)(in[0], in[1]);  // map_binary's element on int32
    }};
  return p;
}

template <Accepts A, class Op, class Nibble = std::nullptr_t>
void binary(const std::string& name, Op op, VjpRule vjp = nullptr, UrRule ur_rule = nullptr,
            Nibble nibble = nullptr) {
  register_primitive(binary_primitive<A>(name, op, std::move(vjp), std::move(ur_rule), nibble));
}

// A binary primitive whose operands commute (Primitive::commutative).
inline Primitive commuting(Primitive p) {
  p.commutative = true;
  return p;
}

// kEquality: eq and ne, which also compare complex numbers (and commute).
template <bool kEquality, class Op>
void comparison(const std::string& name, Op op) {
  Primitive p;
  p.name = name;
  p.operands = exactly(2);
  p.elementwise = true;
  p.commutative = kEquality;
  p.abstract_eval = [name](const Avals& in, const Params&) {
    // weak if both operands are
    return Avals{binary_aval(name, kEquality ? Accepts::Any : Accepts::Ordered, in, DType::Bool)};
  };
  p.batch = batch_broadcasting;
  p.kernel = [op](const Tensors& in_, const Params&, const Avals& out_) {
    auto run = [&](const Tensors& in, const Avals&) {
      auto compare = [&](auto tag) {
        using T = decltype(tag);
        using C = compute_type_t<T>;
        return as_tensors(map_binary<T, bool>(in[0], in[1], DType::Bool,
                                           [&](T x, T y) { return bool(op(C(x), C(y))); }));
      };
      if constexpr (kEquality) {
        if (is_complex(in[0].dtype())) return dispatch_complex(in[0].dtype(), compare);
        return dispatch_dtype(in[0].dtype(), except_float8(on_unsigned_bits(compare)));
      }
      return dispatch_dtype(in[0].dtype(), except_float8(compare));
    };
    if (computed_widened(in_[0].dtype())) return widened(in_, out_, run);
    return run(in_, out_);
  };
  p.int_scalar_op = {2, /*selection=*/false, [op](const int32_t* in, int) {
    using C = compute_type_t<int32_t>;
    return int32_t(bool(op(C(in[0]), C(in[1]))));  // the kernel's element on int32
  }};
  register_primitive(std::move(p));
}


// The four family units (elementwise_*.cpp).
void register_unary_elementwise_primitives();
void register_integer_elementwise_primitives();
void register_binary_elementwise_primitives();
void register_select_convert_primitives();
void register_complex_elementwise_primitives();
void register_special_elementwise_primitives();  // lgamma, digamma, polygamma, zeta, igamma, ...

}  // namespace meshsim::elementwise
