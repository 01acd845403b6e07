#include "meshsim/kernels/narrow_float_blocks.h"

#include "meshsim/kernels/dispatch.h"

namespace meshsim {

void narrow_to_float32(DType dt, const void* from, float* to, int64_t n) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_small_float_v<T>) {
      const T* a = static_cast<const T*>(from);
      for (int64_t k = 0; k < n; ++k) to[k] = to_compute(a[k]);
    }
  });
}

void float32_to_narrow(DType dt, const float* from, void* to, int64_t n) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_small_float_v<T>) {
      T* o = static_cast<T*>(to);
      for (int64_t k = 0; k < n; ++k) o[k] = from_compute<T>(from[k]);
    }
  });
}

}  // namespace meshsim
