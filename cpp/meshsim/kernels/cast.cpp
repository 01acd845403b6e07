#include "meshsim/kernels/cast.h"

#include "meshsim/ir/primitive.h"

namespace meshsim {

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Aval to;
  to.shape = t.shape();
  to.dtype = dtype;
  return primitive("convert_element_type").kernel({t}, Params{{"new_dtype", dtype}}, {to})[0];
}

}  // namespace meshsim
