#include "meshsim/kernels/cast.h"

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
      return map_unary<In, Out>(t, dtype, [](In x) { return convert_op<Out>(compute_type_t<In>(x)); });
    });
  });
}

}  // namespace meshsim
