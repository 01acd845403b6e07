// Complex arithmetic as XLA on CPU computes it, bit for bit: products by the
// schoolbook formula with fused multiply-adds and quotients by Smith's
// algorithm with fused multiply-adds (no C99 Annex G recovery of infinities
// from NaN products, which std::complex's operators do), subnormal parts
// flushed to zero as XLA's CPU code runs; and the functions JAX lowers for
// complex operands. Also the generic spellings (log1p_op, expm1_op, ...) the
// elementwise kernels call for real and complex elements alike.
#pragma once
#include <cmath>
#include <complex>
#include <limits>

#include "meshsim/core/element_types.h"

namespace meshsim {

// Both parts negated: -0.0 for 0.0, as XLA's negation.
template <class F>
std::complex<F> neg_op(std::complex<F> x) {
  return {-x.real(), -x.imag()};
}

// A subnormal part read or written as zero (of its sign), as XLA's CPU code
// runs with denormals flushed.
template <class F>
F flush_subnormal(F v) {
  return std::fabs(v) < std::numeric_limits<F>::min() ? v * F(0) : v;
}
template <class F>
std::complex<F> flush_subnormal(std::complex<F> z) {
  return {flush_subnormal(z.real()), flush_subnormal(z.imag())};
}

template <class F>
std::complex<F> mul_op(std::complex<F> x_in, std::complex<F> y_in) {
  const std::complex<F> x = flush_subnormal(x_in), y = flush_subnormal(y_in);
  const F a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  return flush_subnormal(std::complex<F>(std::fma(a, c, -(b * d)), std::fma(b, c, a * d)));
}

// Smith's algorithm, scaling by the larger part of the divisor, then the
// corner cases where it gives NaN although the quotient is infinite or zero.
template <class F>
std::complex<F> div_op(std::complex<F> x_in, std::complex<F> y_in) {
  const std::complex<F> x = flush_subnormal(x_in), y = flush_subnormal(y_in);
  const F a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  F re, im;
  if (std::fabs(c) < std::fabs(d)) {
    const F ratio = flush_subnormal(c / d), denom = std::fma(c, ratio, d);
    re = std::fma(a, ratio, b) / denom;
    im = std::fma(b, ratio, -a) / denom;
  } else {
    const F ratio = flush_subnormal(d / c), denom = std::fma(d, ratio, c);
    re = std::fma(b, ratio, a) / denom;
    im = std::fma(-a, ratio, b) / denom;
  }
  if (!(std::isnan(re) && std::isnan(im))) return flush_subnormal(std::complex<F>(re, im));
  const F inf = std::numeric_limits<F>::infinity();
  if (c == 0 && d == 0 && (!std::isnan(a) || !std::isnan(b)))
    return {std::copysign(inf, c) * a, std::copysign(inf, c) * b};
  if ((std::isinf(a) || std::isinf(b)) && std::isfinite(c) && std::isfinite(d)) {
    const F a1 = std::copysign(std::isinf(a) ? F(1) : F(0), a), b1 = std::copysign(std::isinf(b) ? F(1) : F(0), b);
    return {inf * (a1 * c + b1 * d), inf * (b1 * c - a1 * d)};
  }
  if ((std::isinf(c) || std::isinf(d)) && std::isfinite(a) && std::isfinite(b)) {
    const F c1 = std::copysign(std::isinf(c) ? F(1) : F(0), c), d1 = std::copysign(std::isinf(d) ? F(1) : F(0), d);
    return {F(0) * (a * c1 + b * d1), F(0) * (b * c1 - a * d1)};
  }
  return {re, im};
}

// max/min as JAX lowers them for complex operands: lexicographic on (real,
// imag) by two float comparisons and a select, so x wins only when a
// comparison says so (a NaN part makes y win). Not associative with NaNs:
// reductions fold in order.
template <class F>
std::complex<F> max_op(std::complex<F> x, std::complex<F> y) {
  const bool pick_x = x.real() == y.real() ? x.imag() > y.imag() : x.real() > y.real();
  return pick_x ? x : y;
}
template <class F>
std::complex<F> min_op(std::complex<F> x, std::complex<F> y) {
  const bool pick_x = x.real() == y.real() ? x.imag() < y.imag() : x.real() < y.real();
  return pick_x ? x : y;
}

// Functions XLA (or JAX's lowering) expands into real operations for complex
// operands, each as its expansion computes it, bit for bit
// (complex_math.cpp): |z| (a real result), z / |z|, exp, expm1, log, log1p, sqrt
// and the trigonometric and hyperbolic functions with their inverses. The
// templates are the generic
// spellings for real elements.
float complex_abs(std::complex<float> z);
double complex_abs(std::complex<double> z);
std::complex<float> sign_op(std::complex<float> z);
std::complex<double> sign_op(std::complex<double> z);
template <class T> T exp_op(T x) { return std::exp(x); }
std::complex<float> exp_op(std::complex<float> z);
std::complex<double> exp_op(std::complex<double> z);
template <class T> T log_op(T x) { return std::log(x); }
std::complex<float> log_op(std::complex<float> z);
std::complex<double> log_op(std::complex<double> z);
template <class T> T sqrt_op(T x) { return std::sqrt(x); }
std::complex<float> sqrt_op(std::complex<float> z);
std::complex<double> sqrt_op(std::complex<double> z);
template <class T> T sin_op(T x) { return std::sin(x); }
std::complex<float> sin_op(std::complex<float> z);
std::complex<double> sin_op(std::complex<double> z);
template <class T> T cos_op(T x) { return std::cos(x); }
std::complex<float> cos_op(std::complex<float> z);
std::complex<double> cos_op(std::complex<double> z);
template <class T> T tan_op(T x) { return std::tan(x); }
std::complex<float> tan_op(std::complex<float> z);
std::complex<double> tan_op(std::complex<double> z);
template <class T> T sinh_op(T x) { return std::sinh(x); }
std::complex<float> sinh_op(std::complex<float> z);
std::complex<double> sinh_op(std::complex<double> z);
template <class T> T cosh_op(T x) { return std::cosh(x); }
std::complex<float> cosh_op(std::complex<float> z);
std::complex<double> cosh_op(std::complex<double> z);
template <class T> T tanh_op(T x) { return std::tanh(x); }
std::complex<float> tanh_op(std::complex<float> z);
std::complex<double> tanh_op(std::complex<double> z);
template <class T> T asin_op(T x) { return std::asin(x); }
std::complex<float> asin_op(std::complex<float> z);
std::complex<double> asin_op(std::complex<double> z);
template <class T> T acos_op(T x) { return std::acos(x); }
std::complex<float> acos_op(std::complex<float> z);
std::complex<double> acos_op(std::complex<double> z);
template <class T> T asinh_op(T x) { return std::asinh(x); }
std::complex<float> asinh_op(std::complex<float> z);
std::complex<double> asinh_op(std::complex<double> z);
template <class T> T acosh_op(T x) { return std::acosh(x); }
std::complex<float> acosh_op(std::complex<float> z);
std::complex<double> acosh_op(std::complex<double> z);
template <class T> T atan_op(T x) { return std::atan(x); }
std::complex<float> atan_op(std::complex<float> z);
std::complex<double> atan_op(std::complex<double> z);
template <class T> T atanh_op(T x) { return std::atanh(x); }
std::complex<float> atanh_op(std::complex<float> z);
std::complex<double> atanh_op(std::complex<double> z);

// Functions whose real form is not std:: for complex arguments.
template <class T> T log1p_op(T x) { return std::log1p(x); }
std::complex<float> log1p_op(std::complex<float> z);
std::complex<double> log1p_op(std::complex<double> z);
template <class T> T expm1_op(T x) { return std::expm1(x); }
std::complex<float> expm1_op(std::complex<float> z);
std::complex<double> expm1_op(std::complex<double> z);

template <class F>
std::complex<F> logistic_op(std::complex<F> z) {
  return div_op(std::complex<F>(1), std::complex<F>(1) + std::exp(-z));
}

template <class F>
std::complex<F> rsqrt_op(std::complex<F> z) {
  return div_op(std::complex<F>(1), std::sqrt(z));
}
template <class T> T rsqrt_op(T x) { return T(1) / std::sqrt(x); }

template <class T> T exp2_op(T x) { return std::exp2(x); }
template <class F>
std::complex<F> exp2_op(std::complex<F> z) {
  constexpr F kLn2 = F(0.6931471805599453);
  return std::exp(std::complex<F>(z.real() * kLn2, z.imag() * kLn2));
}

template <class T> T pow_op(T x, T y) { return std::pow(x, y); }
// exp(y log x), with 0^y = 1 for y = 0 and 0 for real y > 0.
template <class F>
std::complex<F> pow_op(std::complex<F> x, std::complex<F> y) {
  if (x == std::complex<F>(0)) {
    if (y == std::complex<F>(0)) return {F(1), F(0)};
    if (y.imag() == 0 && y.real() > 0) return {F(0), F(0)};
    const F nan = std::numeric_limits<F>::quiet_NaN();
    return {nan, nan};
  }
  return std::exp(mul_op(y, std::log(x)));
}

}  // namespace meshsim
