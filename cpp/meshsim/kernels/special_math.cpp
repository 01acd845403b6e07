// XLA's expansions of lgamma, digamma, zeta and polygamma (special_math.h).
// XLA's CPU compiler contracts a product into the sum that reads it; the
// kernels write those multiply-adds as std::fma, and everything else unfused.
#include "meshsim/kernels/special_math.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/xla_math.h"

namespace meshsim::special_math {
namespace {

template <class F> F xla_log(F x) {
  if constexpr (std::is_same_v<F, float>) return xla_math::log_f32(x);
  else return xla_math::log_f64(x);
}
template <class F> F xla_log1p(F x) {
  if constexpr (std::is_same_v<F, float>) return xla_math::log1p_f32(x);
  else return xla_math::log1p_f64(x);
}
template <class F> F xla_exp(F x) {
  if constexpr (std::is_same_v<F, float>) return xla_math::exp_f32(x);
  else return xla_math::exp_f64(x);
}

constexpr double kPi = 3.14159265358979323846;
constexpr double kLanczosGamma = 7.0;
constexpr double kLanczosBase = 0.99999999999980993227684700473478;
constexpr double kLanczosCoefficients[8] = {
    676.520368121885098567009190444019, -1259.13921672240287047156078755283, 771.3234287776530788486528258894,
    -176.61502916214059906584551354,    12.507343278686904814458936853,      -0.13857109526572011689554707,
    9.984369578019570859563e-6,         1.50563273514931155834e-7};

// The series is evaluated at z + 1 >= 1/2: z = x - 1, or -x where x < 1/2
// is reflected.
template <class F> F lanczos_z(F x) { return x < F(0.5) ? -x : x - F(1); }

// log(t) for t = g + 1/2 + z, as log(g + 1/2) + log1p(z / (g + 1/2)): exact
// where z is small. XLA divides by the constant as it multiplies by its
// reciprocal, rounded to F.
template <class F> F lanczos_log_t(F z) {
  return F(std::log(kLanczosGamma + 0.5)) + xla_log1p(z * (F(1) / F(kLanczosGamma + 0.5)));
}

}  // namespace

template <class F> F lgamma(F x) {
  const F z = lanczos_z(x);
  F a = F(kLanczosBase);
  for (int i = 0; i < 8; ++i) a = a + F(kLanczosCoefficients[i]) / (z + F(i + 1));
  const F t = F(kLanczosGamma + 0.5) + z;
  const F log_t = lanczos_log_t(z);
  // (z + 1/2) log t - t as (z + 1/2 - t / log t) log t, which does not overflow.
  const F sum = (z + F(0.5)) - t / log_t;
  const F series = std::fma(sum, log_t, F((std::log(2.0) + std::log(kPi)) / 2)) + xla_log(a);
  if (std::isinf(x)) return std::numeric_limits<F>::infinity();
  if (!(x < F(0.5))) return series;
  // log pi - lgamma(1 - x) - log|sin(pi x)|, with sin's argument reduced to
  // pi |frac(x)| <= pi / 2 (exactly 0 at the poles).
  const F abs_x = std::fabs(x);
  F frac = abs_x - std::floor(abs_x);
  if (F(0.5) < frac) frac = F(1) - frac;
  const F log_sin = xla_log(std::sin(F(kPi) * frac));
  if (!std::isfinite(log_sin)) return -log_sin;
  return (F(std::log(kPi)) - log_sin) - series;
}

template <class F> F digamma(F x) {
  const F z = lanczos_z(x);
  F a = F(kLanczosBase), a_prime = F(0);
  for (int i = 0; i < 8; ++i) {
    const F c = F(kLanczosCoefficients[i]);
    const F zi = z + F(i + 1);
    a_prime = a_prime - c / (zi * zi);
    a = a + c / zi;
  }
  const F t = F(kLanczosGamma + 0.5) + z;
  F out = (lanczos_log_t(z) + a_prime / a) - F(kLanczosGamma) / t;
  if (x < F(0.5)) {
    // digamma(1 - x) - pi cot(pi x), with x reduced to [-1/2, 1/2] first.
    const F reduced = x + std::fabs(std::floor(x + F(0.5)));
    const F angle = F(kPi) * reduced;
    out = out - (F(kPi) * std::cos(angle)) / std::sin(angle);
  }
  if (x <= F(0) && x == std::floor(x)) return std::numeric_limits<F>::quiet_NaN();
  return out;
}

template <class F> F zeta(F x, F q) {
  // (2k)! / B_2k for k = 12 down to 1.
  static constexpr double kCoefficients[12] = {
      -7.1661652561756670113e18, 1.8152105401943546773e17, -4.5979787224074726105e15, 1.1646782814350067249e14,
      -2.950130727918164224e12,  7.47242496e10,             -1.8924375803183791606e9,  47900160.0,
      -1209600.0,                30240.0,                   -720.0,                    12.0};
  const F neg_x = -x;
  // Ten terms of the series, then the Euler-Maclaurin tail from q + 10. XLA
  // folds the chain of increments q + 1 + 1 + ... into q + k.
  F initial = std::pow(q, neg_x);
  for (int k = 1; k < 10; ++k) initial = initial + std::pow(q + F(k), neg_x);
  const F a = q + F(10);
  const F neg_power = std::pow(a, neg_x);
  F s = initial + (neg_power * a) / (x - F(1));
  const F a_inverse_square = F(1) / (a * a);
  // The Bernoulli terms by Horner's rule: h = factor * scaled each step, a
  // product XLA contracts into the next step's sum.
  F factor = F(0), scaled = F(0);
  for (int i = 0; i < 11; ++i) {
    const F inner = i == 0 ? F(1.0 / kCoefficients[0]) : std::fma(factor, scaled, F(1.0 / kCoefficients[i]));
    factor = (x + F(22 - 2 * i)) * (x + F(21 - 2 * i));
    scaled = a_inverse_square * inner;
  }
  const F tail = std::fma(factor, scaled, F(1.0 / kCoefficients[11]));
  s = std::fma(neg_power, std::fma(x / a, tail, F(0.5)), s);
  // XLA keeps the partial sum where the tail is below the smallest subnormal
  // times it: that constant is flushed to zero, so the test never holds.
  const F nan = std::numeric_limits<F>::quiet_NaN(), inf = std::numeric_limits<F>::infinity();
  F out = s;
  if (x < F(1)) out = nan;
  const bool q_nonpositive = q <= F(0);
  const bool x_integer = x == std::floor(x);
  if (q_nonpositive && !x_integer) out = nan;
  // A pole at each integer q <= 0, +inf only for even integer x.
  if (q_nonpositive && q == std::floor(q)) out = x_integer && std::fmod(x, F(2)) == F(0) ? inf : nan;
  if (x == F(1)) out = inf;
  return out;
}

template <class F> F polygamma(F n, F x) {
  if (n != std::floor(n) || n < F(0)) return std::numeric_limits<F>::quiet_NaN();
  if (n == F(0)) return digamma(x);
  const F sign = F(2) * std::fmod(n, F(2)) - F(1);
  const F n_plus_one = n + F(1);
  return (sign * xla_exp(lgamma(n_plus_one))) * zeta(n_plus_one, x);
}

template float lgamma(float);
template double lgamma(double);
template float digamma(float);
template double digamma(double);
template float zeta(float, float);
template double zeta(double, double);
template float polygamma(float, float);
template double polygamma(double, double);

}  // namespace meshsim::special_math
