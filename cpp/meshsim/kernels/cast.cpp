#include "meshsim/kernels/cast.h"

#include <cmath>
#include <type_traits>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/elementwise.h"
#include "meshsim/kernels/scalar_math.h"

namespace meshsim {

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  return dispatch_any_dtype(t.dtype(), [&](auto from) {
    using In = decltype(from);
    return dispatch_any_dtype(dtype, [&](auto to) {
      using Out = decltype(to);
      // XLA tests a bfloat16 for zero on its bits: a subnormal is true, not flushed as a
      // float32 comparison would read it (core/denormals.h).
      if constexpr (std::is_same_v<In, bfloat16> && std::is_same_v<Out, bool>)
        return map_unary<In, Out>(t, dtype, [](In x) { return (x.bits & 0x7fff) != 0; });
      // XLA converts a 16-bit float to float8_e5m2 on its bits, giving every NaN as 0x7f (a
      // float32 or float64 NaN keeps its sign: 0x7e / 0xfe).
      else if constexpr ((std::is_same_v<In, bfloat16> || std::is_same_v<In, float16>) &&
                         std::is_same_v<Out, float8_e5m2>)
        return map_unary<In, Out>(t, dtype, [](In x) {
          const float f = compute_type_t<In>(x);
          if (!std::isnan(f)) return convert_op<Out>(f);
          Out nan;
          nan.bits = 0x7f;
          return nan;
        });
      else
        return map_unary<In, Out>(t, dtype, [](In x) { return convert_op<Out>(compute_type_t<In>(x)); });
    });
  });
}

}  // namespace meshsim
