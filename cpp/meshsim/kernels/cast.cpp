#include "meshsim/kernels/cast.h"

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
      else
        return map_unary<In, Out>(t, dtype, [](In x) { return convert_op<Out>(compute_type_t<In>(x)); });
    });
  });
}

}  // namespace meshsim
