// XLA's expansions of lgamma, digamma, zeta and polygamma, and JAX's of the
// incomplete gamma functions (special_math.h). XLA's CPU compiler contracts a
// product into a sum that reads it; the kernels write those multiply-adds as
// std::fma, and everything else unfused.
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

namespace {

// digamma(x) from the Lanczos argument z the unreflected branch uses (x - 1
// as computed in the program).
template <class F> F digamma_from(F x, F unreflected_z) {
  const F z = x < F(0.5) ? -x : unreflected_z;
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

}  // namespace

template <class F> F digamma(F x) { return digamma_from(x, x - F(1)); }

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

namespace {

// What an incomplete-gamma expansion returns: the function's value or its
// derivative in a.
enum class IgammaMode { kValue, kDerivative };

// P(a, x) = ax / a * sum_n x^n / ((a + 1) ... (a + n)) and its derivative in
// a, term by term while `enabled` (each term is then the series' last change).
template <class F> F igamma_series(F ax, F x, F a, bool enabled, IgammaMode mode) {
  constexpr F eps = std::numeric_limits<F>::epsilon();
  F r = a, c = F(1), ans = F(1), dc_da = F(0), dans_da = F(0);
  while (enabled) {
    r = r + F(1);
    const F x_over_r = x / r;
    dc_da = std::fma(dc_da, x_over_r, -((c * x) / (r * r)));
    dans_da = dans_da + dc_da;
    ans = std::fma(c, x_over_r, ans);  // contracted although the product is read again
    c = c * x_over_r;
    enabled = mode == IgammaMode::kValue ? c / ans > eps : std::fabs(dc_da / dans_da) > eps;
  }
  if (mode == IgammaMode::kValue) return (ans * ax) / a;
  // digamma(a + 1), whose a + 1 - 1 XLA folds into a.
  const F dlogax_da = xla_log(x) - digamma_from(a + F(1), a);
  return (ax * std::fma(ans, dlogax_da, dans_da)) / a;
}

// Q(a, x) / ax by the convergents p_k / q_k of its continued fraction (the
// caller scales it, a product XLA contracts into 1 - Q), or dQ/da; the
// convergents and their derivatives in a are rescaled by epsilon when they
// grow past 1 / epsilon.
template <class F> F igammac_fraction(F ax, F x, F a, bool enabled, IgammaMode mode) {
  constexpr F eps = std::numeric_limits<F>::epsilon();
  F y = F(1) - a;
  F z = (x + y) + F(1);
  F pkm2 = F(1), qkm2 = x, pkm1 = x + F(1), qkm1 = z * x;
  F ans = pkm1 / qkm1;
  F dpkm2_da = F(0), dqkm2_da = F(0), dpkm1_da = F(0), dqkm1_da = -x;
  F dans_da = (F(0) - ans * dqkm1_da) / qkm1;
  for (F c = F(0); enabled && c < F(2000);) {
    c = c + F(1);
    y = y + F(1);
    z = z + F(2);
    const F yc = y * c;
    const F pk = std::fma(pkm1, z, -(pkm2 * yc));
    const F qk = std::fma(qkm1, z, -(qkm2 * yc));
    const bool nonzero = qk != F(0);
    const F r = pk / qk;
    const F t = nonzero ? std::fabs((ans - r) / r) : F(1);
    if (nonzero) ans = r;
    const F dpk_da = std::fma(pkm2, c, std::fma(-dpkm2_da, yc, std::fma(dpkm1_da, z, -pkm1)));
    const F dqk_da = std::fma(qkm2, c, std::fma(-dqkm2_da, yc, std::fma(dqkm1_da, z, -qkm1)));
    const F dans_da_new = nonzero ? std::fma(-ans, dqk_da, dpk_da) / qk : dans_da;
    const F grad_change = nonzero ? std::fabs(dans_da_new - dans_da) : F(1);
    dans_da = dans_da_new;
    pkm2 = pkm1;
    pkm1 = pk;
    qkm2 = qkm1;
    qkm1 = qk;
    dpkm2_da = dpkm1_da;
    dqkm2_da = dqkm1_da;
    dpkm1_da = dpk_da;
    dqkm1_da = dqk_da;
    if (std::fabs(pk) > F(1) / eps) {
      pkm2 = pkm2 * eps;
      pkm1 = pkm1 * eps;
      qkm2 = qkm2 * eps;
      qkm1 = qkm1 * eps;
      dpkm2_da = dpkm2_da * eps;
      dqkm2_da = dqkm2_da * eps;
      dpkm1_da = dpkm1_da * eps;
      dqkm1_da = dqkm1_da * eps;
    }
    enabled = mode == IgammaMode::kValue ? t > eps : grad_change > eps;
  }
  if (mode == IgammaMode::kValue) return ans;
  const F dlogax_da = xla_log(x) - digamma(a);
  return ax * std::fma(ans, dlogax_da, dans_da);
}

// log(x^a e^-x / Gamma(a)), and whether exp of it underflows.
template <class F> F log_gamma_density_scale(F a, F x) {
  return std::fma(a, xla_log(x), -x) - lgamma(a);
}
template <class F> bool underflows(F log_ax) {
  return log_ax < -std::log(std::numeric_limits<F>::max());
}

}  // namespace

template <class F> F igamma_grad_a(F a, F x) {
  const bool is_nan = std::isnan(a) || std::isnan(x);
  const bool x_is_zero = x == F(0);
  const bool domain_error = x < F(0) || a <= F(0);
  const bool use_fraction = x > F(1) && x > a;
  const F log_ax = log_gamma_density_scale(a, x);
  const bool enabled = !(x_is_zero || domain_error || underflows(log_ax) || is_nan);
  const F ax = xla_exp(log_ax);
  F out = use_fraction ? -igammac_fraction(ax, x, a, enabled, IgammaMode::kDerivative)
                       : igamma_series(ax, x, a, enabled, IgammaMode::kDerivative);
  if (x_is_zero) out = F(0);
  if (domain_error || is_nan) out = std::numeric_limits<F>::quiet_NaN();
  return out;
}

// The edge cases P(a, x) and Q(a, x) share, and the log of their scale.
template <class F> struct IncompleteGammaArgs {
  bool x_is_inf, a_is_zero, x_is_zero, domain_error;
  F log_ax;
};

template <class F> IncompleteGammaArgs<F> incomplete_gamma_args(F a, F x) {
  const bool is_nan = std::isnan(a) || std::isnan(x);
  const bool a_is_zero = a == F(0), x_is_zero = x == F(0);
  return {x == std::numeric_limits<F>::infinity(), a_is_zero, x_is_zero,
          x < F(0) || a < F(0) || (a_is_zero && x_is_zero) || is_nan, log_gamma_density_scale(a, x)};
}

template <class F> F igamma(F a, F x) {
  const auto [x_is_inf, a_is_zero, x_is_zero, domain_error, log_ax] = incomplete_gamma_args(a, x);
  const bool use_fraction = x >= F(1) && x > a;
  const bool enabled = !(x_is_zero || domain_error || underflows(log_ax) || x_is_inf);
  const F ax = xla_exp(log_ax);
  F out = use_fraction ? std::fma(-igammac_fraction(ax, x, a, enabled, IgammaMode::kValue), ax, F(1))
                       : igamma_series(ax, x, a, enabled, IgammaMode::kValue);
  if (x_is_zero) out = F(0);
  if (x_is_inf) out = F(1);
  if (domain_error) out = std::numeric_limits<F>::quiet_NaN();
  return out;
}

template <class F> F igammac(F a, F x) {
  const auto [x_is_inf, a_is_zero, x_is_zero, domain_error, log_ax] = incomplete_gamma_args(a, x);
  const bool use_series = x < F(1) || x < a;
  const bool enabled = !(domain_error || underflows(log_ax) || x_is_inf || a_is_zero);
  const F ax = xla_exp(log_ax);
  F out = use_series ? F(1) - igamma_series(ax, x, a, enabled, IgammaMode::kValue)
                     : igammac_fraction(ax, x, a, enabled, IgammaMode::kValue) * ax;
  if (x_is_inf || a_is_zero) out = F(0);
  if (domain_error) out = std::numeric_limits<F>::quiet_NaN();
  return out;
}


namespace {

// Cephes' Chebyshev coefficients, for float32 (the tails of the float64 lists).
constexpr double kI0eBelow8[30] = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,  -2.67079385394061173391E-7,
    1.11738753912010371815E-6,   -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4,  -5.76375574538582365885E-4,
    1.63947561694133579842E-3,   -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,  -9.49010970480476444210E-2,
    1.71620901522208775349E-1,   -3.04682672343198398683E-1, 6.76795274409476084995E-1};
constexpr double kI0eAbove8[25] = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
    2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
constexpr double kI1eBelow8[29] = {
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9,  -4.44505912879632808065E-8, 2.00329475355213526229E-7,
    -8.56872026469545474066E-7, 3.47025130813767847674E-6,  -1.32731636560394358279E-5,
    4.78156510755005422638E-5,  -1.61760815825896745588E-4, 5.12285956168575772895E-4,
    -1.51357245063125314899E-3, 4.15642294431288815669E-3,  -1.05640848946261981558E-2,
    2.47264490306265168283E-2,  -5.29459812080949914269E-2, 1.02643658689847095384E-1,
    -1.76416518357834055153E-1, 2.52587186443633654823E-1};
constexpr double kI1eAbove8[25] = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
    3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
    -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};
// How many of each list's last coefficients float32 uses.
constexpr int kFloat32Terms[4] = {18, 7, 17, 7};

// Clenshaw's recurrence for the Chebyshev series sum' c_k T_k(t/2):
// b0 = t b1 - b2 + c, the product contracted into the subtraction (and, on
// the second step, where b2 is the zero XLA drops, into the addition).
template <class F, size_t N> F chebyshev(F t, const double (&coefficients)[N], int terms) {
  F b0 = F(0), b1 = F(0), b2 = F(0);
  for (size_t k = N - terms; k < N; ++k) {
    b2 = b1;
    b1 = b0;
    const F c = F(coefficients[k]);
    if (k == N - terms) b0 = c;
    else if (k == N - terms + 1) b0 = std::fma(t, b1, c);
    else b0 = std::fma(t, b1, -b2) + c;
  }
  return (b0 - b2) * F(0.5);
}

template <class F, size_t N> F chebyshev_of(F t, const double (&coefficients)[N], int float32_terms) {
  return chebyshev(t, coefficients, std::is_same_v<F, float> ? float32_terms : int(N));
}

}  // namespace

template <class F> F bessel_i0e(F x) {
  const F z = std::fabs(x);
  if (z <= F(8)) return chebyshev_of(std::fma(F(0.5), z, F(-2)), kI0eBelow8, kFloat32Terms[0]);
  return chebyshev_of(F(32) / z - F(2), kI0eAbove8, kFloat32Terms[1]) / std::sqrt(z);
}

template <class F> F bessel_i1e(F x) {
  const F z = std::fabs(x);
  const F magnitude = z <= F(8) ? z * chebyshev_of(std::fma(F(0.5), z, F(-2)), kI1eBelow8, kFloat32Terms[2])
                                : chebyshev_of(F(32) / z - F(2), kI1eAbove8, kFloat32Terms[3]) / std::sqrt(z);
  const F sign = x > F(0) ? F(1) : x < F(0) ? F(-1) : x;  // keeps a zero's sign and NaN
  return sign * magnitude;
}

template float bessel_i0e(float);
template double bessel_i0e(double);
template float bessel_i1e(float);
template double bessel_i1e(double);
template float igamma(float, float);
template double igamma(double, double);
template float igammac(float, float);
template double igammac(double, double);
template float igamma_grad_a(float, float);
template double igamma_grad_a(double, double);
template float lgamma(float);
template double lgamma(double);
template float digamma(float);
template double digamma(double);
template float zeta(float, float);
template double zeta(double, double);
template float polygamma(float, float);
template double polygamma(double, double);

}  // namespace meshsim::special_math
