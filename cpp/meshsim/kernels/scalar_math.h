// Scalar semantics of the elementwise primitives, as XLA computes them on CPU.
// Integer arithmetic wraps around as in XLA (integer_wrap.h). Narrow floats (bfloat16,
// float16, float8) never reach these functions: kernels compute them in float32.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/integer_wrap.h"
#include "meshsim/kernels/complex_math.h"

namespace meshsim {

// XLA on CPU: x / 0 is -1 (all bits set), x % 0 is x, and INT_MIN / -1 wraps
// (to INT_MIN, remainder 0) instead of trapping.
template <class T> T div_op(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return T(-1);
    if constexpr (std::is_signed_v<T>) if (y == -1) return neg_op(x);
  }
  return x / y;
}
template <class T> T rem_op(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return x;
    if constexpr (std::is_signed_v<T>) if (y == -1) return T(0);
    return x % y;
  } else {
    return std::fmod(x, y);
  }
}

// max/min propagate NaN and order -0 below +0, as XLA does; written as
// selects so that the loops vectorise. XLA's maxps/minps read a subnormal
// operand as zero (core/denormals.h), so a subnormal result is flushed.
template <class T> T max_op(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T larger = x > y ? x : y;
    larger = x == y ? (std::signbit(x) ? y : x) : larger;
    return x != x ? x : y != y ? y : flush_subnormal(larger);
  }
  return x > y ? x : y;
}
template <class T> T min_op(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T smaller = x < y ? x : y;
    smaller = x == y ? (std::signbit(x) ? x : y) : smaller;
    return x != x ? x : y != y ? y : flush_subnormal(smaller);
  }
  return x < y ? x : y;
}

template <class T> T sign_op(T x) {
  // ±0 and NaN as they are; a subnormal reads as zero of its sign (x * 0 flushes it).
  if constexpr (std::is_floating_point_v<T>) return x > 0 ? T(1) : x < 0 ? T(-1) : x * T(0);
  else if constexpr (std::is_signed_v<T>) return T((x > 0) - (x < 0));
  else return T(x != 0);
}

template <class T> T abs_op(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::abs(x);
  else return x < 0 ? neg_op(x) : x;
}

// 1 / (1 + exp(-x)) without overflowing exp for large |x|.
template <class T> T logistic_op(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// XLA:CPU's float32 and float64 erf_inv, bit for bit (scalar_math.cpp).
float erf_inv_f32(float x);
double erf_inv_f64(double x);

template <class T> T erf_inv_op(T x) {
  if constexpr (std::is_same_v<T, float>) return erf_inv_f32(x);
  else return erf_inv_f64(x);
}

template <class T> using Bits = std::make_unsigned_t<T>;
constexpr unsigned kBitsPerByte = 8;

template <class T> T population_count_op(T x) { return T(__builtin_popcountll(Bits<T>(x))); }
template <class T> T clz_op(T x) {
  constexpr int bits = sizeof(T) * kBitsPerByte;
  const Bits<T> u = Bits<T>(x);
  return u == 0 ? T(bits) : T(__builtin_clzll(u) - (64 - bits));
}

// Shift amounts outside [0, bits) give 0, or the sign fill for arithmetic
// right shifts (which act on the bit pattern, also for unsigned types).
template <class T> T shift_left_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  return Bits<T>(y) >= bits ? T(0) : T(Bits<T>(x) << Bits<T>(y));
}
template <class T> T shift_right_logical_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  return Bits<T>(y) >= bits ? T(0) : T(Bits<T>(x) >> Bits<T>(y));
}
template <class T> T shift_right_arithmetic_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  const auto s = static_cast<std::make_signed_t<T>>(x);
  return Bits<T>(y) >= bits ? T(s < 0 ? -1 : 0) : T(s >> Bits<T>(y));
}

// JAX lowers integer_pow to this chain of multiplies (square-and-multiply,
// then one division for negative powers); same order, same rounding.
template <class T> T integer_pow_op(T x, int64_t y) {
  if (y == 0) return T(1);
  uint64_t n = y < 0 ? uint64_t(-y) : uint64_t(y);
  T acc = x;
  bool started = false;
  while (n > 0) {
    if (n & 1) {
      acc = started ? mul_op(acc, x) : x;
      started = true;
    }
    n >>= 1;
    if (n > 0) x = mul_op(x, x);
  }
  return y < 0 ? div_op(T(1), acc) : acc;
}

// Casts saturate from float to integer, with NaN -> 0 (XLA's convert on CPU);
// integer narrowing wraps. `x` is the input's compute value (float32 for the
// narrow floats, int for the four-bit integers). Complex to real keeps the
// real part, also for bool (XLA's convert tests the real part only).
template <class Out, class In> Out convert_op(In x) {
  if constexpr (is_complex_v<In> && is_complex_v<Out>) {
    using P = typename Out::value_type;
    return Out(static_cast<P>(x.real()), static_cast<P>(x.imag()));
  } else if constexpr (is_complex_v<In>) {
    return convert_op<Out>(x.real());
  } else if constexpr (is_complex_v<Out>) {
    using P = typename Out::value_type;
    return Out(static_cast<P>(compute_type_t<In>(x)), P(0));
  } else if constexpr (std::is_same_v<Out, bool>) {
    return x != In(0);
  } else if constexpr (std::is_floating_point_v<In> && std::is_integral_v<Out>) {
    if (std::isnan(x)) return Out(0);
    if (x <= In(std::numeric_limits<Out>::min())) return std::numeric_limits<Out>::min();
    if (x >= In(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
    return static_cast<Out>(x);
  } else {
    return static_cast<Out>(x);
  }
}

}  // namespace meshsim
