// The non-template scalar functions of scalar_math.h: XLA:CPU's float32
// erf_inv, reproduced bit for bit on top of xla_math.h's log1p.
#include "meshsim/kernels/scalar_math.h"
#include "meshsim/kernels/xla_math.h"


namespace meshsim {

// XLA:CPU's float32 erf_inv, bit for bit, so that random.normal reproduces
// JAX: StableHLO's erfInv32 (M. Giles' polynomial) on top of XLA's own log1p
// and log, with the multiply-adds XLA fuses into FMAs on CPU (written as
// explicit fmaf, so the result does not depend on the target ISA). The other
// products and sums must stay unfused: fp-contract=off.
// A clone for CPUs with FMA turns each fmaf into one instruction.
#define MESHSIM_NO_CONTRACT __attribute__((optimize("fp-contract=off"), target_clones("fma", "default")))

MESHSIM_NO_CONTRACT float erf_inv_f32(float x) {
  static constexpr float kLt5[9] = {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f,
                                    -4.39150654e-06f, 0.00021858087f, -0.00125372503f,
                                    -0.00417768164f, 0.246640727f, 1.50140941f};
  static constexpr float kGe5[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f, 0.00573950773f, -0.0076224613f,
                                    0.00943887047f, 1.00167406f, 2.83297682f};
  const float w = -xla_math::log1p_f32(x * -x);
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
