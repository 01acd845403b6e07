// The non-template scalar functions of scalar_math.h: XLA:CPU's float32 log,
// log1p and erf_inv, reproduced bit for bit.
#include "meshsim/kernels/scalar_math.h"

#include <algorithm>
#include <cstring>

namespace meshsim {

// XLA:CPU's float32 erf_inv, bit for bit, so that random.normal reproduces
// JAX: StableHLO's erfInv32 (M. Giles' polynomial) on top of XLA's own log1p
// and log, with the multiply-adds XLA fuses into FMAs on CPU (written as
// explicit fmaf, so the result does not depend on the target ISA). The other
// products and sums must stay unfused: fp-contract=off.
// A clone for CPUs with FMA turns each fmaf into one instruction.
#define MESHSIM_NO_CONTRACT __attribute__((optimize("fp-contract=off"), target_clones("fma", "default")))

// XLA:CPU's log (the Cephes polynomial of Eigen) for x > 0.
MESHSIM_NO_CONTRACT float xla_log_f32(float x) {
  if (!(x > 0.0f) || std::isinf(x)) return x == 0.0f ? -HUGE_VALF : x + std::nanf("");
  static constexpr float kP[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f,
                                  -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f};
  x = std::max(x, std::numeric_limits<float>::min());
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  float e = 1.0f + static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f);
  bits = (bits & ~0x7f800000u) | 0x3f000000u;  // mantissa in [0.5, 1)
  float m;
  std::memcpy(&m, &bits, sizeof m);
  if (m < 0.707106781186547524f) {  // shift to [sqrt(1/2), sqrt(2)) - 1
    e -= 1.0f;
    m = (m - 1.0f) + m;
  } else {
    m = m - 1.0f;
  }
  const float m2 = m * m, m3 = m2 * m;
  float y = std::fmaf(m, kP[0], kP[1]), y1 = std::fmaf(m, kP[3], kP[4]), y2 = std::fmaf(m, kP[6], kP[7]);
  y = std::fmaf(y, m, kP[2]);
  y1 = std::fmaf(y1, m, kP[5]);
  y2 = std::fmaf(y2, m, kP[8]);
  y = std::fmaf(y, m3, y1);
  y = std::fmaf(y, m3, y2);
  y = std::fmaf(y, m3, -2.12194440e-4f * e);
  const float r = std::fmaf(-0.5f, m2, m) + y;
  return std::fmaf(0.693359375f, e, r);
}

// XLA:CPU's log1p: a Cephes rational function for |x| < sqrt(2) - 1, else log(1 + x).
MESHSIM_NO_CONTRACT float xla_log1p_f32(float x) {
  if (!(std::fabs(x) < 0.41421356237309504880f)) return xla_log_f32(x + 1.0f);
  static constexpr float kNum[7] = {4.5270000862445199635215E-5f, 4.9854102823193375972212E-1f,
                                    6.5787325942061044846969E0f,  2.9911919328553073277375E1f,
                                    6.0949667980987787057556E1f,  5.7112963590585538103336E1f,
                                    2.0039553499201281259648E1f};
  static constexpr float kDen[7] = {1.0f,
                                    1.5062909083469192043167E1f,
                                    8.3047565967967209469434E1f,
                                    2.2176239823732856465394E2f,
                                    3.0909872225312059774938E2f,
                                    2.1642788614495947685003E2f,
                                    6.0118660497603843919306E1f};
  float num = 0.0f, den = 0.0f;
  for (int i = 0; i < 7; ++i) {
    num = std::fmaf(num, x, kNum[i]);
    den = std::fmaf(den, x, kDen[i]);
  }
  const float x2 = x * x;
  return x + std::fmaf(-0.5f, x2, (x * x2) * (num / den));
}

MESHSIM_NO_CONTRACT float erf_inv_f32(float x) {
  static constexpr float kLt5[9] = {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f,
                                    -4.39150654e-06f, 0.00021858087f, -0.00125372503f,
                                    -0.00417768164f, 0.246640727f, 1.50140941f};
  static constexpr float kGe5[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f, 0.00573950773f, -0.0076224613f,
                                    0.00943887047f, 1.00167406f, 2.83297682f};
  const float w = -xla_log1p_f32(x * -x);
  const bool lt = w < 5.0f;
  const float v = lt ? w - 2.5f : std::sqrt(w) - 3.0f;
  const float* c = lt ? kLt5 : kGe5;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fmaf(p, v, c[i]);
  return std::fabs(x) == 1.0f ? x * std::numeric_limits<float>::infinity() : p * x;
}
#undef MESHSIM_NO_CONTRACT

// float64: the float32 estimate refined by Newton steps on erf(y) = x, which
// reach full double precision (XLA has its own f64 polynomial; x64 is opt-in).
double erf_inv_f64(double x) {
  if (!(std::fabs(x) < 1.0)) return std::fabs(x) == 1.0 ? x * HUGE_VAL : std::nan("");
  double y = erf_inv_f32(static_cast<float>(x));
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 3 && std::isfinite(y); ++i)
    y -= (std::erf(y) - x) / (two_over_sqrt_pi * std::exp(-y * y));
  return y;
}


}  // namespace meshsim
