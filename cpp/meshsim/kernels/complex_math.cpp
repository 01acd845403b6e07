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
float real_expm1(float x) { return xla_math::expm1_f32(x); }
double real_expm1(double x) { return xla_math::expm1_f64(x); }

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

// The rounding error of a + b = sum (Knuth's two-sum).
template <class F>
F sum_error(F a, F b, F sum) {
  const F b_part = sum - a, a_part = sum - b_part;
  return (a - a_part) + (b - b_part);
}

// log(1 + z) as JAX's lowering expands it: log1p(2x + y^2 + x^2) / 2 with the
// sum in double-word arithmetic; log|1 + z| for |1 + x| + |y| < 0.2 (by XLA's
// log of the squared modulus); for max(|x|, |y|) beyond sqrt(max) / 100,
// log(max) + log1p((min / max)^2) / 2. The angle is atan2(y, 1 + x).
template <class F>
std::complex<F> log1p_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F ax = std::fabs(x), ay = std::fabs(y);
  const F x_plus_one = x + F(1);
  const F yy = y * y, xx = x * x;
  F re;
  const auto [larger, smaller] = larger_and_smaller_part(ax, ay);
  constexpr F kLarge = std::is_same_v<F, float> ? F(1.84467419e+17f) : F(1.3407807929942595e+152);
  if (larger > kLarge) {
    const F ratio = smaller / larger;
    re = std::fma(real_log1p(smaller == larger ? F(1) : ratio * ratio), F(0.5), real_log(larger));
  } else if (std::fabs(x_plus_one) + ay < F(0.2)) {
    re = real_log(std::fma(x_plus_one, x_plus_one, yy)) * F(0.5);
  } else {
    const F twice_x = x + x;
    const F sum1 = twice_x + yy, sum2 = sum1 + xx;
    const F y_error = square_error(y, yy), x_error = square_error(x, xx);
    const F sum3 = sum2 + y_error, sum4 = sum3 + x_error;
    const F errors = ((sum_error(twice_x, yy, sum1) + sum_error(sum1, xx, sum2)) + sum_error(sum2, y_error, sum3)) +
                     sum_error(sum3, x_error, sum4);
    re = real_log1p(sum4 + errors) * F(0.5);
  }
  return {flush_subnormal(re), std::atan2(z_in.imag(), x_plus_one)};
}

// atanh(z) as JAX's lowering expands it: the real part sign(x) log1p(4 |x| /
// ((1 - |x|)^2 + y^2)) / 4, with the fraction replaced by 1 / |x| where |y| is
// negligible against |x| and by 1 / ((|x| / y + y / |x|) y) (or 0 for an
// infinite part) beyond the range where the squares are safe; the imaginary
// part atan2(2y, (1 - |x|)(1 + |x|) - y^2) / 2, +-pi / 2 out of that range.
template <class F>
std::complex<F> atanh_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  constexpr bool kFloat = std::is_same_v<F, float>;
  constexpr F kSafe = kFloat ? F(2.81475044e+14f) : F(8.1129638414606718e+31);
  constexpr F kNegligible = kFloat ? F(16777218) : F(9007199254740994.0);
  constexpr F kInf = std::numeric_limits<F>::infinity();
  const F ax = std::fabs(x), ay = std::fabs(y);
  const bool safe = ax < kSafe && ay < kSafe;
  const F one_less = F(1) - ax, yy = y * y;
  F fraction;
  if (safe) fraction = ax / std::fma(one_less, one_less, yy);
  else if (ay * kNegligible < ax) fraction = F(1) / ax;
  else if (std::fabs(x) == kInf || std::fabs(y) == kInf) fraction = F(0);
  else fraction = F(1) / (((ax / y) + (y / ax)) * y);
  const F re = ((x >= 0 ? F(1) : F(-1)) * real_log1p(fraction * F(4))) * F(0.25);
  const F angle = safe ? std::atan2(y + y, std::fma(one_less, ax + F(1), -yy))
                       : (y >= 0 ? F(1) : F(-1)) * F(3.14159265358979323846);
  return flush_subnormal(std::complex<F>(re, angle * F(0.5)));
}

// atan z = -i atanh(i z).
template <class F>
std::complex<F> atan_t(std::complex<F> z) {
  const std::complex<F> t = atanh_t(std::complex<F>(-z.imag(), z.real()));
  return {t.imag(), -t.real()};
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

// hypot(a, b) for a, b >= 0 as JAX's asin expansion computes it: as
// expanded_hypot, but with the square root's argument a fused multiply-add
// (XLA computes it in a kernel of its own).
template <class F>
F fused_hypot(F a, F b) {
  const auto [larger, smaller] = larger_and_smaller_part(a, b);
  const F ratio = smaller / larger, squared = ratio * ratio;
  const F root = std::sqrt(std::fma(ratio, ratio, F(1)));
  const F general = root == F(1) && squared > F(0) ? std::fma(larger * squared, F(0.5), larger) : larger * root;
  return larger == smaller ? larger * F(1.41421356237309504880) : general;
}

// The kernel of asin and acos by the algorithm of Hull, Fairgrieve and Tang,
// as JAX's lowering expands it, on ax = |x| and ay = |y|: with r = |z + 1|,
// s = |z - 1| and a = (r + s) / 2, the denominator d of the real part's
// atan2 and log(a + sqrt(a^2 - 1)), taken through log1p of a - 1 (computed
// by cases), or log(2 max) plus a correction for huge arguments. XLA splits
// acosh's expansion into kernels differently: there a + 1 and a + ax are
// fused multiply-adds (`fused_halves`).
template <class F>
std::pair<F, F> asin_kernel(F ax, F ay, bool fused_halves = false) {
  constexpr bool kFloat = std::is_same_v<F, float>;
  const F x_plus_one = ax + F(1), x_less_one = ax + F(-1);
  const F r = fused_hypot(std::fabs(x_plus_one), ay), s = fused_hypot(std::fabs(x_less_one), ay);
  const F a = (r + s) * F(0.5);
  const F yy = ay * ay;
  const F half_yy_over_r_sum = (yy * F(0.5)) / (r + x_plus_one);
  // a - 1 without cancellation
  F a_less_one;
  const bool small = ay < F(kFloat ? 4.33680869e-19f : 5.9666725849601654e-154) && ax < F(1);
  if (small) {
    a_less_one = -((x_plus_one * x_less_one) / (a + F(1)));
  } else if (ax >= F(1)) {
    a_less_one = std::fma(s + x_less_one, F(0.5), half_yy_over_r_sum);
  } else if (a <= F(1.5)) {
    a_less_one = half_yy_over_r_sum + (yy * F(0.5)) / (s - x_less_one);
  } else {
    a_less_one = a + F(-1);
  }
  const F half_a_plus_x = (fused_halves ? std::fma(r + s, F(0.5), ax) : a + ax) * F(0.5);
  const F big_threshold = F(kFloat ? 2.30584287e+18f : 1.6759759912428245e+153);
  F denominator;
  if (larger_and_smaller_part(ax, ay).first >= big_threshold) {
    denominator = ay;
  } else if (ax <= F(1)) {
    denominator = std::sqrt(half_a_plus_x * (yy / (r + x_plus_one) + (s - x_less_one)));
  } else {
    denominator = ay * std::sqrt(half_a_plus_x / (r + x_plus_one) + half_a_plus_x / (s + x_less_one));
  }
  const F huge = ax < F(kFloat ? 2.30584285e+30f : 1.6759759912428244e+165)
                     ? F(kFloat ? 2.30584274e+12f : 1.6759759912428242e+147)
                     : F(kFloat ? 2.30584283e+20f : 1.6759759912428244e+155);
  const bool y_dominates = ay >= huge;
  const F larger = y_dominates ? ay : ax;
  const F limit = y_dominates ? huge : big_threshold;
  F log_part;
  if (larger >= limit) {
    const F ratio = y_dominates && ay != std::numeric_limits<F>::infinity() ? ax / ay : F(0);
    log_part = std::fma(real_log1p(ratio * ratio), F(0.5), real_log(larger) + F(0.69314718055994530942));
  } else {
    const F root = std::sqrt(a_less_one * (fused_halves ? std::fma(r + s, F(0.5), F(1)) : a + F(1)));
    log_part = small ? ay / root : real_log1p(a_less_one + root);
  }
  return {denominator, log_part};
}

// asin z = atan2(x, d) + i sign(y) log(...); acos z = atan2(d, x) - i
// sign(y) log(...); asinh z = i asin(-i z) by the same kernel on (|y|, |x|).
// atan2 takes the parts as they are: it sees, and may return, subnormals.
template <class F>
std::complex<F> asin_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [denominator, log_part] = asin_kernel(std::fabs(z.real()), std::fabs(z.imag()));
  return {std::atan2(z_in.real(), denominator), flush_subnormal(z.imag() < 0 ? -log_part : log_part)};
}
template <class F>
std::complex<F> acos_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [denominator, log_part] = asin_kernel(std::fabs(z.real()), std::fabs(z.imag()));
  return {std::atan2(denominator, z_in.real()), flush_subnormal(z.imag() < 0 ? log_part : -log_part)};
}
template <class F>
std::complex<F> asinh_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [denominator, log_part] = asin_kernel(std::fabs(z.imag()), std::fabs(z.real()));
  return {flush_subnormal(z.real() < 0 ? -log_part : log_part), std::atan2(z_in.imag(), denominator)};
}
// acosh z = log(...) + i sign(y) atan2(d, x), negated if its real part is
// below zero (as JAX's lowering selects).
template <class F>
std::complex<F> acosh_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [denominator, log_part] = asin_kernel(std::fabs(z.real()), std::fabs(z.imag()), true);
  const F angle = std::atan2(denominator, z_in.real());
  const std::complex<F> w(flush_subnormal(log_part), z.imag() < 0 ? -angle : angle);
  return log_part < 0 ? neg_op(w) : w;
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

// cos z = cos x cosh y - i sin x sinh y, and sin z = sin x cosh y + i cos x
// sinh y, with cosh y and sinh y from expm1(y) and expm1(-y) (as JAX expands
// them); a zero real part gives the other part +0.0.
template <class F>
std::pair<F, F> cosh_and_sinh_by_expm1(F y) {
  const F up = real_expm1(y), down = real_expm1(-y);
  return {((up + down) + F(2)) * F(0.5), (up - down) * F(0.5)};
}
template <class F>
std::complex<F> cos_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [cosh_y, sinh_y] = cosh_and_sinh_by_expm1(z.imag());
  const F re = std::cos(z.real()) * cosh_y;
  const F im = z.real() == 0 ? F(0) : -std::sin(z.real()) * sinh_y;
  return flush_subnormal(std::complex<F>(re, im));
}
template <class F>
std::complex<F> sin_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const auto [cosh_y, sinh_y] = cosh_and_sinh_by_expm1(z.imag());
  const F im = std::cos(z.real()) * sinh_y;
  const F re = z.real() == 0 ? F(0) : std::sin(z.real()) * cosh_y;
  return flush_subnormal(std::complex<F>(re, im));
}

// cosh z and sinh z as JAX expands them: exp(z - ln 2) +- exp(-ln 2 - z),
// each exp as exp_t computes it.
template <class F>
std::pair<std::complex<F>, std::complex<F>> exps_less_ln2(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  constexpr F kMinusLn2 = F(-0.69314718055994530942);
  return {exp_t(std::complex<F>(z.real() + kMinusLn2, z.imag() + F(0))),
          exp_t(std::complex<F>(kMinusLn2 - z.real(), F(0) - z.imag()))};
}
template <class F>
std::complex<F> cosh_t(std::complex<F> z) {
  const auto [up, down] = exps_less_ln2(z);
  return flush_subnormal(std::complex<F>(up.real() + down.real(), up.imag() + down.imag()));
}
template <class F>
std::complex<F> sinh_t(std::complex<F> z) {
  const auto [up, down] = exps_less_ln2(z);
  return flush_subnormal(std::complex<F>(up.real() - down.real(), up.imag() - down.imag()));
}

// exp(z) - 1 = (expm1(x) + 1) (cos y - 1) + expm1(x) + i (expm1(x) + 1) sin y,
// as XLA expands it, with cos y - 1 by its Taylor polynomial for y^2 <
// 0.61685 (constants rounded to the type); a zero y gives +0.0.
template <class F>
std::complex<F> expm1_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F em = real_expm1(x), e = em + F(1);
  const F y2 = y * y, y4 = y2 * y2;
  static constexpr double kCosCoefficients[] = {4.737750796424621e-14,  -1.147028484342536e-11, 2.087675428708152e-09,
                                                -2.755731921499979e-07, 2.480158730157055e-05,  -0.0013888888888888872,
                                                0.041666666666666664};
  F p = F(kCosCoefficients[0]);
  for (int i = 1; i < 7; ++i) p = std::fma(p, y2, F(kCosCoefficients[i]));
  const F cos_less_one = y2 >= F(0.61685) ? std::cos(y) + F(-1) : std::fma(y4, p, y2 * F(-0.5));
  const F re = std::fma(em, cos_less_one + F(1), cos_less_one);
  const F im = y == 0 ? F(0) : e * std::sin(y);
  return flush_subnormal(std::complex<F>(re, im));
}

// tanh z = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y), as XLA computes it:
// (expm1(2x) - expm1(-2x)) / (expm1(2x) + expm1(-2x) + 4 cos^2 y) and
// 4 cos y sin y over the same; +-1 where the expm1 sum overflows, and the
// real part NaN where the imaginary one is NaN for finite x; the imaginary
// part +0.0 for y = 0 and for infinite x with a NaN numerator.
template <class F>
std::complex<F> tanh_t(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F twice_x = x + x;
  const F up = real_expm1(twice_x), down = real_expm1(twice_x * F(-1));
  const F c = std::cos(y), s = std::sin(y);
  const F sum = up + down;
  const F denominator = std::fma(c * c, F(4), sum);
  const F im_numerator = (c * s) * F(4);
  const bool x_infinite = std::fabs(x) == std::numeric_limits<F>::infinity();
  const bool im_nan = std::isnan(im_numerator);
  F re = sum == std::numeric_limits<F>::infinity() ? std::copysign(F(1), x) : (up - down) / denominator;
  F im = im_numerator / denominator;
  if (im_nan && !x_infinite) re = std::numeric_limits<F>::quiet_NaN();
  if (y == 0 || (x_infinite && im_nan)) im = F(0);
  return flush_subnormal(std::complex<F>(re, im));
}

// tan z = -i tanh(i z).
template <class F>
std::complex<F> tan_t(std::complex<F> z) {
  const std::complex<F> t = tanh_t(std::complex<F>(z.imag() * F(-1), z.real()));
  return {t.imag(), t.real() * F(-1)};
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
std::complex<float> cos_op(std::complex<float> z) { return cos_t(z); }
std::complex<double> cos_op(std::complex<double> z) { return cos_t(z); }
std::complex<float> sin_op(std::complex<float> z) { return sin_t(z); }
std::complex<double> sin_op(std::complex<double> z) { return sin_t(z); }
std::complex<float> tan_op(std::complex<float> z) { return tan_t(z); }
std::complex<double> tan_op(std::complex<double> z) { return tan_t(z); }
std::complex<float> cosh_op(std::complex<float> z) { return cosh_t(z); }
std::complex<double> cosh_op(std::complex<double> z) { return cosh_t(z); }
std::complex<float> sinh_op(std::complex<float> z) { return sinh_t(z); }
std::complex<double> sinh_op(std::complex<double> z) { return sinh_t(z); }
std::complex<float> tanh_op(std::complex<float> z) { return tanh_t(z); }
std::complex<double> tanh_op(std::complex<double> z) { return tanh_t(z); }
std::complex<float> expm1_op(std::complex<float> z) { return expm1_t(z); }
std::complex<double> expm1_op(std::complex<double> z) { return expm1_t(z); }
std::complex<float> log1p_op(std::complex<float> z) { return log1p_t(z); }
std::complex<double> log1p_op(std::complex<double> z) { return log1p_t(z); }
std::complex<float> atanh_op(std::complex<float> z) { return atanh_t(z); }
std::complex<double> atanh_op(std::complex<double> z) { return atanh_t(z); }
std::complex<float> atan_op(std::complex<float> z) { return atan_t(z); }
std::complex<double> atan_op(std::complex<double> z) { return atan_t(z); }
std::complex<float> asin_op(std::complex<float> z) { return asin_t(z); }
std::complex<double> asin_op(std::complex<double> z) { return asin_t(z); }
std::complex<float> acos_op(std::complex<float> z) { return acos_t(z); }
std::complex<double> acos_op(std::complex<double> z) { return acos_t(z); }
std::complex<float> asinh_op(std::complex<float> z) { return asinh_t(z); }
std::complex<double> asinh_op(std::complex<double> z) { return asinh_t(z); }
std::complex<float> acosh_op(std::complex<float> z) { return acosh_t(z); }
std::complex<double> acosh_op(std::complex<double> z) { return acosh_t(z); }

}  // namespace meshsim
