// Scalar entry points of xla_math.h: one lane of the batch code, so that a
// scalar caller computes exactly what the vector loops do.
#include "meshsim/kernels/xla_math.h"

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#define MESHSIM_HAS_RSQRT_ESTIMATE 1
#endif

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

float rsqrt_f32(float x) {
#ifdef MESHSIM_HAS_RSQRT_ESTIMATE
  const float y = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
  if (x <= 0.0f || std::isinf(x) || std::fpclassify(x) == FP_SUBNORMAL) return y;
  const float xy = x * y;
  return std::fma(y * -0.5f, std::fma(xy, y, -1.0f), y);
#else
  return 1.0f / std::sqrt(x);
#endif
}

int64_t libm_tail_start(const Shape& shape) {
  constexpr int64_t kVectorWidth = 8, kUnrolledBelow = 16;
  const int64_t n = num_elements(shape);
  if (shape.size() != 1 || n >= kUnrolledBelow) return n;
  const int64_t tail = n % kVectorWidth;
  const bool libm = tail == 3 || tail == 5 || tail == 6 || tail == 7;
  return libm ? n - tail : n;
}

}  // namespace meshsim::xla_math
