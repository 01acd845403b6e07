// Scalar entry points of xla_math.h: one lane of the batch code, so that a
// scalar caller computes exactly what the vector loops do.
#include "meshsim/kernels/xla_math.h"

namespace meshsim::xla_math {
namespace {
template <class C, class F>
C one_lane(C x, F batch_function) {
  return batch_function(xsimd::batch<C>(x)).get(0);
}
}  // namespace

float exp_f32(float x) { return one_lane(x, [](auto b) { return exp_f32(b); }); }
float log_f32(float x) { return one_lane(x, [](auto b) { return log_f32(b); }); }
float tanh_f32(float x) { return one_lane(x, [](auto b) { return tanh_f32(b); }); }
float erf_f32(float x) { return one_lane(x, [](auto b) { return erf_f32(b); }); }
float log1p_f32(float x) { return one_lane(x, [](auto b) { return log1p_f32(b); }); }
float expm1_f32(float x) { return one_lane(x, [](auto b) { return expm1_f32(b); }); }
float logistic_f32(float x) { return one_lane(x, [](auto b) { return logistic_f32(b); }); }
double tanh_f64(double x) { return one_lane(x, [](auto b) { return tanh_f64(b); }); }
double exp_f64(double x) { return one_lane(x, [](auto b) { return exp_f64(b); }); }
double log_f64(double x) { return log_f64_element(x); }
double log1p_f64(double x) { return one_lane(x, [](auto b) { return log1p_f64(b); }); }
double expm1_f64(double x) { return one_lane(x, [](auto b) { return expm1_f64(b); }); }

int64_t libm_tail_start(const Shape& shape) {
  constexpr int64_t kVectorWidth = 8, kUnrolledBelow = 16;
  const int64_t n = num_elements(shape);
  if (shape.size() != 1 || n >= kUnrolledBelow) return n;
  const int64_t tail = n % kVectorWidth;
  const bool libm = tail == 3 || tail == 5 || tail == 6 || tail == 7;
  return libm ? n - tail : n;
}

}  // namespace meshsim::xla_math
