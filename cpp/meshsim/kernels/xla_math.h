// Transcendental functions as XLA's CPU backend computes them. XLA does not call
// libm for float32 exp, log, tanh and erf (nor float64 tanh): it emits its own
// polynomial or rational approximations, with multiplies and adds contracted
// into fused multiply-adds, and runs them with denormals flushed. These are the
// same sequences of operations on xsimd batches, so results agree bit for bit
// (tests/test_xla_math.py); only the constants and the order of operations are
// taken from XLA, the code is ours. Kernels run with denormals flushed
// (core/denormals.h), as XLA's code does, which several edge cases rely on.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "meshsim/core/shape.h"

namespace meshsim::xla_math {

// a * b + c rounded once. xsimd 8 rounds twice for AVX-512 batches and for
// instruction sets without FMA, so those take the instruction directly or
// std::fma lane by lane.
template <class B>
inline B fused_mul_add(const B& a, const B& b, const B& c) {
  using Register = typename B::register_type;
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<Register, __m512>) return B(_mm512_fmadd_ps(a, b, c));
  if constexpr (std::is_same_v<Register, __m512d>) return B(_mm512_fmadd_pd(a, b, c));
#endif
#if XSIMD_WITH_FMA3_AVX || XSIMD_WITH_FMA3_AVX2 || XSIMD_WITH_FMA3_SSE
  if constexpr (!std::is_same_v<Register, __m512> && !std::is_same_v<Register, __m512d>)
    return xsimd::fma(a, b, c);
#endif
  using C = typename B::value_type;
  alignas(64) C la[B::size], lb[B::size], lc[B::size];
  a.store_aligned(la);
  b.store_aligned(lb);
  c.store_aligned(lc);
  for (std::size_t k = 0; k < B::size; ++k) la[k] = std::fma(la[k], lb[k], lc[k]);
  return B::load_aligned(la);
}

// x clamped to [lo, hi] with NaN passing through, as XLA's compare-and-select
// clamps do (x86's min/max instructions would return the bound instead).
template <class B>
inline B clamp_keeping_nan(const B& x, typename B::value_type lo, typename B::value_type hi) {
  const B low = xsimd::select(x < B(lo), B(lo), x);
  return xsimd::select(low > B(hi), B(hi), low);
}

// exp(x) = 2^n e^r with n = floor(x / ln 2 + 1/2) clamped to [-127, 127] and r
// = x - n ln 2 in two steps (Cephes' split of ln 2), e^r by Cephes' degree-5
// polynomial; 2^n is built in the exponent bits, so n = -127 gives 0. Inputs
// are clamped to [-87.8, 88.8] first: exp(88.72284) is inf one input late.
template <class A>
xsimd::batch<float, A> exp_f32(const xsimd::batch<float, A>& input) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  const B x_in = clamp_keeping_nan(input, -87.8f, 88.8f);
  B n = xsimd::floor(fused_mul_add(x_in, B(1.44269504088896341f), B(0.5f)));
  n = clamp_keeping_nan(n, -127.0f, 127.0f);
  B r = fused_mul_add(-n, B(0.693359375f), x_in);
  r = fused_mul_add(-n, B(-2.12194440e-4f), r);
  B p = fused_mul_add(B(1.9875691500e-4f), r, B(1.3981999507e-3f));
  p = fused_mul_add(p, r, B(8.3334519073e-3f));
  p = fused_mul_add(p, r, B(4.1665795894e-2f));
  p = fused_mul_add(p, r, B(1.6666665459e-1f));
  p = fused_mul_add(p, r, B(5.0000001201e-1f));
  p = fused_mul_add(p, r * r, r) + B(1.0f);
  const I biased = xsimd::batch_cast<int32_t>(n) + I(127);
  const B two_to_n = xsimd::bitwise_cast<B>(biased << 23);
  // A NaN input comes back quieted, as XLA returns it.
  return xsimd::select(input != input, input + input, p * two_to_n);
}

// Cephes' log: the input's mantissa m in [0.5, 1) and exponent e, shifted to
// m in [sqrt(1/2), sqrt(2)) - 1, a degree-8 polynomial in three interleaved
// chains, and e ln 2 added back in two pieces. Zero (and a flushed subnormal)
// gives -inf, +inf itself, anything else not above zero an all-ones NaN.
template <class A>
xsimd::batch<float, A> log_f32(const xsimd::batch<float, A>& input) {
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using I = xsimd::batch<int32_t, A>;
  const auto invalid = !(input > B(0.0f));
  const auto is_zero = input == B(0.0f);
  const auto is_pos_inf = input == B(INFINITY);
  const B smallest_normal = xsimd::bitwise_cast<B>(U(0x00800000u));
  const U bits = xsimd::bitwise_cast<U>(xsimd::max(input, smallest_normal));
  const I exponent = xsimd::bitwise_cast<I>(bits >> 23) - I(0x7f);
  B m = xsimd::bitwise_cast<B>((bits & U(~0x7f800000u)) | U(0x3f000000u));  // in [0.5, 1)
  B e = B(1.0f) + xsimd::batch_cast<float>(exponent);
  const auto below_sqrt_half = m < B(0.707106781186547524f);
  const B doubled_part = xsimd::select(below_sqrt_half, m, B(0.0f));
  m = m - B(1.0f);
  e = e - xsimd::select(below_sqrt_half, B(1.0f), B(0.0f));
  m = m + doubled_part;
  const B m2 = m * m, m3 = m2 * m;
  B y = fused_mul_add(m, B(7.0376836292e-2f), B(-1.1514610310e-1f));
  B y1 = fused_mul_add(m, B(-1.2420140846e-1f), B(1.4249322787e-1f));
  B y2 = fused_mul_add(m, B(2.0000714765e-1f), B(-2.4999993993e-1f));
  y = fused_mul_add(y, m, B(1.1676998740e-1f));
  y1 = fused_mul_add(y1, m, B(-1.6668057665e-1f));
  y2 = fused_mul_add(y2, m, B(3.3333331174e-1f));
  y = fused_mul_add(y, m3, y1);
  y = fused_mul_add(y, m3, y2);
  y = fused_mul_add(y, m3, e * B(-2.12194440e-4f));
  B result = fused_mul_add(B(-0.5f), m2, m) + y;
  result = fused_mul_add(B(0.693359375f), e, result);
  const B all_ones = xsimd::bitwise_cast<B>(U(0xffffffffu));
  result = xsimd::select(invalid, all_ones, result);
  result = xsimd::select(is_pos_inf, B(INFINITY), result);
  return xsimd::select(is_zero, B(-INFINITY), result);
}

// A [13/6] odd/even rational approximation (Eigen's fast tanh) on x clamped to
// +-7.99881172 (where it reaches exactly 1 with FMAs); |x| < 0.0004 returns x
// itself (a subnormal too, which reads as zero in the comparison), |x| >= 20
// returns +-1. NaN stays NaN.
template <class A>
xsimd::batch<float, A> tanh_f32(const xsimd::batch<float, A>& input) {
  using B = xsimd::batch<float, A>;
  constexpr float kClamp = 7.99881172180175781f;
  const B x = clamp_keeping_nan(input, -kClamp, kClamp);
  const B x2 = x * x;
  B p = fused_mul_add(x2, B(-2.76076847742355e-16f), B(2.00018790482477e-13f));
  p = fused_mul_add(x2, p, B(-8.60467152213735e-11f));
  p = fused_mul_add(x2, p, B(5.12229709037114e-08f));
  p = fused_mul_add(x2, p, B(1.48572235717979e-05f));
  p = fused_mul_add(x2, p, B(6.37261928875436e-04f));
  p = fused_mul_add(x2, p, B(4.89352455891786e-03f));
  p = x * p;
  B q = fused_mul_add(x2, B(1.19825839466702e-06f), B(1.18534705686654e-04f));
  q = fused_mul_add(x2, q, B(2.26843463243900e-03f));
  q = fused_mul_add(x2, q, B(4.89352518554385e-03f));
  const B abs_x = xsimd::abs(input);
  const B result = xsimd::select(abs_x < B(0.0004f), input, p / q);
  return xsimd::select(abs_x >= B(20.0f), xsimd::copysign(B(1.0f), input), result);
}

// float64 tanh: a [19/18] rational approximation (Eigen's ptanh_double) on x
// clamped to +-17.714196154005176, +-1 from |x| >= 20. No small-argument
// shortcut: a subnormal input is flushed.
template <class A>
xsimd::batch<double, A> tanh_f64(const xsimd::batch<double, A>& input) {
  using B = xsimd::batch<double, A>;
  constexpr double kClamp = 17.714196154005176;
  static constexpr double kNumerator[] = {
      2.6158007860482230e-23, 7.6534862268749319e-19, 3.1309488231386680e-15, 4.2303918148209176e-12,
      2.4618379131293676e-09, 6.8644367682497074e-07, 9.3839087674268880e-05, 5.9809711724441161e-03,
      1.5184719640284322e-01, 1.0};
  static constexpr double kDenominator[] = {
      6.463747022670968018e-21, 5.782506856739003571e-17, 1.293019623712687916e-13, 1.123643448069621992e-10,
      4.492975677839633985e-08, 8.785185266237658698e-06, 8.295161192716231542e-04, 3.437448108450402717e-02,
      4.851805297361760360e-01, 1.0};
  const B x = clamp_keeping_nan(input, -kClamp, kClamp);
  const B x2 = x * x;
  B p(kNumerator[0]), q(kDenominator[0]);
  for (int i = 1; i < 10; ++i) {
    p = fused_mul_add(x2, p, B(kNumerator[i]));
    q = fused_mul_add(x2, q, B(kDenominator[i]));
  }
  const B result = (x * p) / q;
  return xsimd::select(xsimd::abs(input) >= B(20.0), xsimd::copysign(B(1.0), input), result);
}

// float64 exp, XLA's own form: x clamped to [-708.396, 709.783] (the
// results are normal there), n = floor(x log2(e) + 1/2), g = x - n ln 2 in two
// steps, and e^g = 1 + 2 g P(g^2) / (Q(g^2) - g P(g^2)) with Cephes' [2/3]
// Pade coefficients. 2^n is multiplied in as 2^b three times and 2^(n - 3b)
// once (b = floor(n / 4)), so that no factor leaves the exponent range. Below
// the range the result is 0, above it inf; NaN stays NaN.
template <class A>
xsimd::batch<double, A> exp_f64(const xsimd::batch<double, A>& input) {
  using B = xsimd::batch<double, A>;
  using I = xsimd::batch<int64_t, A>;
  constexpr double kHi = 709.782712893384, kLo = -708.3964185322641;
  const B x = clamp_keeping_nan(input, kLo, kHi);
  const B n = xsimd::floor(fused_mul_add(x, B(1.4426950408889634073599), B(0.5)));
  B g = fused_mul_add(-n, B(0.693145751953125), x);
  g = fused_mul_add(-n, B(1.42860682030941723212e-6), g);
  const B g2 = g * g;
  B p = fused_mul_add(B(1.26177193074810590878e-4), g2, B(3.02994407707441961300e-2));
  p = fused_mul_add(p, g2, B(9.99999999999999999910e-1)) * g;
  B q = fused_mul_add(B(3.00198505138664455042e-6), g2, B(2.52448340349684104192e-3));
  q = fused_mul_add(q, g2, B(2.27265548208155028766e-1));
  q = fused_mul_add(q, g2, B(2.00000000000000000009e0));
  const B e_g = fused_mul_add(p / (q - p), B(2.0), B(1.0));
  const auto power_of_two = [](const B& k) {
    const B finite = xsimd::select(k != k, B(0.0), k);  // NaN's lanes: any factor keeps NaN
    return xsimd::bitwise_cast<B>((xsimd::batch_cast<int64_t>(finite) + I(1023)) << 52);
  };
  const B b = xsimd::floor(n * B(0.25));
  const B quarter = power_of_two(b);
  const B result = e_g * quarter * quarter * quarter * power_of_two(n - B(3.0) * b);
  return xsimd::select(input > B(kHi), B(HUGE_VAL), xsimd::select(input < B(kLo), B(0.0), result));
}

// float64 log: the C library's log of each element, as XLA calls it, with a
// subnormal read as zero (-inf) and a positive NaN for anything below zero.
inline double log_f64_element(double x) {
  if (std::fabs(x) < std::numeric_limits<double>::min()) return -std::numeric_limits<double>::infinity();
  if (x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  return std::log(x);
}
template <class A>
xsimd::batch<double, A> log_f64(const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
  alignas(64) double lanes[B::size];
  x.store_aligned(lanes);
  for (double& lane : lanes) lane = log_f64_element(lane);
  return B::load_aligned(lanes);
}

// A [9/12] odd/even rational approximation (Eigen's fast erf); |x| >= 3.8325069
// (where erf rounds to 1 less half an ulp) returns +-1.
template <class A>
xsimd::batch<float, A> erf_f32(const xsimd::batch<float, A>& x) {
  using B = xsimd::batch<float, A>;
  const B x2 = x * x;
  B p = fused_mul_add(x2, B(0.00022905065861350646f), B(0.0034082910107109506f));
  p = fused_mul_add(x2, p, B(0.050955695062380861f));
  p = fused_mul_add(x2, p, B(0.18520832239976145f));
  p = fused_mul_add(x2, p, B(1.128379143519084f));
  p = x * p;
  B q = fused_mul_add(x2, B(-1.1791602954361697e-7f), B(0.000023547966471313185f));
  q = fused_mul_add(x2, q, B(0.0010179625278914885f));
  q = fused_mul_add(x2, q, B(0.014070470171167667f));
  q = fused_mul_add(x2, q, B(0.11098505178285362f));
  q = fused_mul_add(x2, q, B(0.49746925110067538f));
  q = fused_mul_add(x2, q, B(1.0f));
  return xsimd::select(xsimd::abs(x) >= B(3.832506856900711f), xsimd::copysign(B(1.0f), x), p / q);
}

// log(1 + x): for |x| < sqrt(2) - 1 Cephes' [6/6] rational function in x
// (both polynomials by Horner's rule in fused multiply-adds) as
// x + (-x^2 / 2 + x^3 P(x) / Q(x)), else log(1 + x) by XLA's log of the
// type. The float32 and float64 forms differ only in the coefficients'
// rounding. A zero keeps its sign; NaN and x < -1 take the log's NaN.
template <class B>
B log1p_xla(const B& x) {
  using C = typename B::value_type;
  static constexpr C kP[7] = {C(4.5270000862445199635215e-5), C(4.9854102823193375972212e-1),
                              C(6.5787325942061044846969e0),  C(2.9911919328553073277375e1),
                              C(6.0949667980987787057556e1),  C(5.7112963590585538103336e1),
                              C(2.0039553499201281259648e1)};
  static constexpr C kQ[7] = {C(1.0),
                              C(1.5062909083469192043167e1),
                              C(8.3047565967967209469434e1),
                              C(2.2176239823732856465394e2),
                              C(3.0909872225312059774938e2),
                              C(2.1642788614495947685003e2),
                              C(6.0118660497603843919306e1)};
  B p(C(0)), q(C(0));
  for (int i = 0; i < 7; ++i) {
    p = fused_mul_add(p, x, B(kP[i]));
    q = fused_mul_add(q, x, B(kQ[i]));
  }
  const B x2 = x * x;
  const B small = x + fused_mul_add(B(C(-0.5)), x2, (x * x2) * (p / q));
  B large;
  if constexpr (std::is_same_v<C, float>) large = log_f32(x + B(1.0f));
  else large = log_f64(x + B(1.0));
  return xsimd::select(xsimd::abs(x) < B(C(0.41421356237309504880)), small, large);
}
template <class A>
xsimd::batch<float, A> log1p_f32(const xsimd::batch<float, A>& x) { return log1p_xla(x); }
template <class A>
xsimd::batch<double, A> log1p_f64(const xsimd::batch<double, A>& x) { return log1p_xla(x); }

// exp(x) - 1: exp(x) - 1 for |x| > 1/2, else tanh(x / 2) (exp(x) + 1), and x
// itself where x / 2 reads as zero (a subnormal x is kept); exp and tanh are
// XLA's of the type.
template <class B>
B expm1_xla(const B& x) {
  using C = typename B::value_type;
  const B half = x * B(C(0.5));
  B e, t;
  if constexpr (std::is_same_v<C, float>) e = exp_f32(x), t = tanh_f32(half);
  else e = exp_f64(x), t = tanh_f64(half);
  const B result = xsimd::select(xsimd::abs(x) > B(C(0.5)), e - B(C(1)), t * (e + B(C(1))));
  return xsimd::select(half == B(C(0)), x, result);
}
template <class A>
xsimd::batch<float, A> expm1_f32(const xsimd::batch<float, A>& x) { return expm1_xla(x); }
template <class A>
xsimd::batch<double, A> expm1_f64(const xsimd::batch<double, A>& x) { return expm1_xla(x); }

// 1 / (1 + exp(-x)), as XLA expands logistic, exp by exp_f32.
template <class A>
xsimd::batch<float, A> logistic_f32(const xsimd::batch<float, A>& x) {
  using B = xsimd::batch<float, A>;
  return B(1.0f) / (B(1.0f) + exp_f32(-x));
}

// One element through the batch code, for scalar callers.
float exp_f32(float x);
float log_f32(float x);
float tanh_f32(float x);
float erf_f32(float x);
float log1p_f32(float x);
float expm1_f32(float x);
float logistic_f32(float x);
double tanh_f64(double x);
double exp_f64(double x);
double log_f64(double x);
double log1p_f64(double x);
double expm1_f64(double x);

// XLA's loop over a rank-1 float32 array of fewer than 16 elements leaves the
// elements past the last multiple of 8 to LLVM's straight-line vectoriser,
// which calls libm's expf/logf for them when there are 3, 5, 6 or 7. Returns
// the index from which `shape`'s elements are computed that way (its size if
// none are).
int64_t libm_tail_start(const Shape& shape);

}  // namespace meshsim::xla_math
