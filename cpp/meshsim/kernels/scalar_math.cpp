// The non-template scalar functions of scalar_math.h: XLA:CPU's float32 and
// float64 erf_inv, reproduced bit for bit on top of xla_math.h's log1p.
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

// XLA:CPU's float64 erf_inv, bit for bit: StableHLO's erfInv64, M. Giles'
// three double-precision polynomials in w = -log1p(-x^2) (XLA's float64
// log1p), by Horner's rule in fused multiply-adds.
MESHSIM_NO_CONTRACT double erf_inv_f64(double x) {
  static constexpr double kLt6_25[23] = {
      -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
      1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
      6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
      2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
      1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
      4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
      0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
      0.24015818242558961693,     1.6536545626831027356};
  static constexpr double kLt16[19] = {
      2.2137376921775787049e-09,  9.0756561938885390979e-08,  -2.7517406297064545428e-07,
      1.8239629214389227755e-08,  1.5027403968909827627e-06,  -4.013867526981545969e-06,
      2.9234449089955446044e-06,  1.2475304481671778723e-05,  -4.7318229009055733981e-05,
      6.8284851459573175448e-05,  2.4031110387097893999e-05,  -0.0003550375203628474796,
      0.00095328937973738049703,  -0.0016882755560235047313,  0.0024914420961078508066,
      -0.0037512085075692412107,  0.005370914553590063617,    1.0052589676941592334,
      3.0838856104922207635};
  static constexpr double kGe16[17] = {
      -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
      -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
      2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
      -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
      7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
      1.0103004648645343977,      4.8499064014085844221};
  const double w = -xla_math::log1p_f64(x * -x);
  const double* c = w < 6.25 ? kLt6_25 : w < 16.0 ? kLt16 : kGe16;
  const int terms = w < 6.25 ? 23 : w < 16.0 ? 19 : 17;
  const double v = w < 6.25 ? w - 3.125 : std::sqrt(w) - (w < 16.0 ? 3.25 : 5.0);
  double p = c[0];
  for (int i = 1; i < terms; ++i) p = std::fma(p, v, c[i]);
  return std::fabs(x) == 1.0 ? x * std::numeric_limits<double>::infinity() : p * x;
}
#undef MESHSIM_NO_CONTRACT


}  // namespace meshsim
