// The complex functions XLA's CPU backend expands into real operations
// (complex_math.h), on top of XLA's own real exp, log and log1p
// (xla_math.h) and the C library's sin, cos and atan2, which XLA calls. Each
// follows XLA's expansion step by step: the same operations in the same
// order, a product contracted into a fused multiply-add where XLA's compiled
// code has one, and subnormal parts flushed as XLA's CPU code runs.
#include "meshsim/kernels/complex_math.h"

#include "meshsim/kernels/xla_math.h"

namespace meshsim {
namespace {

// XLA's real functions of one type.
float real_exp(float x) { return xla_math::exp_f32(x); }
double real_exp(double x) { return xla_math::exp_f64(x); }
float real_log(float x) { return xla_math::log_f32(x); }
double real_log(double x) { return xla_math::log_f64(x); }
float real_log1p(float x) { return xla_math::log1p_f32(x); }
double real_log1p(double x) { return xla_math::log1p_f64(x); }

// Both parts' magnitudes, the larger first; NaN for both if either part is
// NaN (XLA's maximum and minimum propagate NaN).
template <class F>
std::pair<F, F> larger_and_smaller_part(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return {a + b, a + b};
  return a < b ? std::pair<F, F>{b, a} : std::pair<F, F>{a, b};
}

// hypot(|x|, |y|) as XLA's complex abs computes it: max sqrt(1 + (min/max)^2),
// with min itself where that is NaN (both parts zero or infinite, or a NaN).
template <class F>
F complex_abs_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [larger, smaller] = larger_and_smaller_part(std::fabs(z.real()), std::fabs(z.imag()));
  const F ratio = smaller / larger;
  const F r = larger * std::sqrt(std::fma(ratio, ratio, F(1)));
  return flush_subnormal(std::isnan(r) ? smaller : r);
}

// z / |z| part by part; a zero comes back as it is (signs and all).
template <class F>
std::complex<F> sign_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  if (z.real() == 0 && z.imag() == 0) return z_in;
  const F r = complex_abs_t(z);
  return flush_subnormal(std::complex<F>(z.real() / r, z.imag() / r));
}

// e^x (cos y + i sin y); where e^x overflows, e^(x/2) multiplies in twice so
// that a small cos or sin can bring the product back into range. A zero
// imaginary part gives +0.0 whatever its sign.
template <class F>
std::complex<F> exp_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F e = real_exp(x), half = real_exp(x * F(0.5));
  const F c = std::cos(y), s = std::sin(y);
  const bool overflows = e == std::numeric_limits<F>::infinity();
  const F re = overflows ? (half * c) * half : e * c;
  const F im = y == 0 ? F(0) : overflows ? (half * s) * half : e * s;
  return flush_subnormal(std::complex<F>(re, im));
}

// The rounding error of v * v (v * v + error is exact), by Dekker's
// splitting of v into a high and a low half.
template <class F>
F square_error(F v, F square) {
  constexpr F kSplitter = std::is_same_v<F, float> ? F(4097) : F(134217729);
  const F scaled = v * kSplitter;
  const F high = scaled + (v - scaled), low = v - high;
  const F cross = high * low;
  return std::fma(low, low, (std::fma(high, high, -square) + cross) + cross);
}

// log|z| + i atan2(y, x). Near |z| = 1, log1p(x^2 + y^2 - 1) / 2 with the
// sum taken in double-word arithmetic (the squares' rounding errors kept);
// elsewhere log(max) + log1p((min / max)^2) / 2.
template <class F>
std::complex<F> log_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F xx = x * x, yy = y * y;
  const bool y_larger = yy > xx;
  const F big = y_larger ? yy : xx, small = y_larger ? xx : yy;
  const F big_less_one = big + F(-1);
  const F sum1 = big_less_one + small;
  const F y_error = square_error(y, yy), x_error = square_error(x, xx);
  const F sum2 = sum1 + y_error;
  const F sum3 = sum2 + x_error;
  // The errors of the three additions, accumulated (Knuth's two-sum).
  const F e1 = (big - big) + (small - (sum1 - big_less_one));
  const F e2 = e1 + (y_error - (sum2 - sum1));
  const F e3 = e2 + (x_error - (sum3 - sum2));
  const F near_one = sum3 + e3;
  F re;
  if (std::fabs(near_one) < F(0.5)) {
    re = real_log1p(near_one) * F(0.5);
  } else {
    const F ax = std::fabs(x), ay = std::fabs(y);
    const auto [larger, smaller] = larger_and_smaller_part(ax, ay);
    const F ratio = smaller == larger ? F(1) : smaller / larger;
    re = std::fma(real_log1p(ratio * ratio), F(0.5), real_log(larger));
  }
  // XLA calls the C library's atan2 on the parts as they are: it sees subnormals.
  return {flush_subnormal(re), std::atan2(z_in.imag(), z_in.real())};
}

// hypot(a, b) for a, b >= 0 as XLA's complex sqrt expands it: max sqrt(1 +
// (min/max)^2), with max (1 + (min/max)^2 / 2) where the square root rounds
// to 1 although the square is not zero, and max sqrt(2) for a = b.
template <class F>
F expanded_hypot(F a, F b) {
  const auto [larger, smaller] = larger_and_smaller_part(a, b);
  const F ratio = smaller / larger, squared = ratio * ratio;
  const F root = std::sqrt(squared + F(1));
  const F general = root == F(1) && squared > F(0) ? std::fma(larger * squared, F(0.5), larger) : larger * root;
  return larger == smaller ? larger * F(1.41421356237309504880) : general;
}

// sqrt(z) by XLA's expansion (the C library's csqrt argument, |z| taken by
// expanded_hypot, with separate forms for |x| = |y|, |x| > |y| and |x| < |y|
// and where (|z| + |x|) / 2 has a square root of 0 or inf). A zero imaginary
// part reads as +0.0 on the real result, its sign giving the imaginary one's.
template <class F>
std::complex<F> sqrt_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F ax = std::fabs(x), ay = std::fabs(y);
  constexpr F kSqrt2 = F(1.41421356237309504880), kSqrtHalf = F(0.70710678118654752440);
  const bool equal = ax == ay;
  const F ratio = equal ? F(1) : ax < ay ? ax / ay : ay / ax;
  const F sqrt_ax = std::sqrt(ax), sqrt_ay = std::sqrt(ay);
  const F hypot_z = expanded_hypot(ax, ay);
  const F mid = std::sqrt(std::fma(hypot_z, F(0.5), ax * F(0.5)));
  const bool degenerate = mid == F(0) || mid == std::numeric_limits<F>::infinity();
  const bool x_larger = ax > ay;
  const F hypot_ratio = expanded_hypot(std::fabs(ratio), F(1));
  const F root_x_form = std::sqrt(hypot_ratio + F(1));
  const F root_y_form = std::sqrt(ratio + hypot_ratio);
  F u, v;
  if (equal) {
    u = sqrt_ax * F(1.0986841134678098);  // sqrt((1 + sqrt(2)) / 2)
    v = sqrt_ay * F(0.45508986056222733);  // 1 / (2 sqrt((1 + sqrt(2)) / 2))
  } else {
    const F u_general = x_larger ? sqrt_ax * (root_x_form * kSqrtHalf) : sqrt_ay * (root_y_form * kSqrtHalf);
    u = degenerate ? u_general : mid;
    const F scale = ax < ay ? sqrt_ax / sqrt_ay : sqrt_ay / sqrt_ax;
    const F v_general = x_larger ? (sqrt_ay * scale) / (root_x_form * kSqrt2) : sqrt_ay / (root_y_form * kSqrt2);
    v = degenerate ? v_general : ay / (mid * F(2));
  }
  const bool y_negative = y < 0;
  const F re = x >= 0 ? u : v;
  const F im = x < 0 ? (y_negative ? -u : u) : (y_negative ? -v : v);
  return flush_subnormal(std::complex<F>(re, im));
}

}  // namespace

float complex_abs(std::complex<float> z) { return complex_abs_t(z); }
double complex_abs(std::complex<double> z) { return complex_abs_t(z); }
std::complex<float> sign_op(std::complex<float> z) { return sign_t(z); }
std::complex<double> sign_op(std::complex<double> z) { return sign_t(z); }
std::complex<float> exp_op(std::complex<float> z) { return exp_t(z); }
std::complex<double> exp_op(std::complex<double> z) { return exp_t(z); }
std::complex<float> log_op(std::complex<float> z) { return log_t(z); }
std::complex<double> log_op(std::complex<double> z) { return log_t(z); }
std::complex<float> sqrt_op(std::complex<float> z) { return sqrt_t(z); }
std::complex<double> sqrt_op(std::complex<double> z) { return sqrt_t(z); }

}  // namespace meshsim
