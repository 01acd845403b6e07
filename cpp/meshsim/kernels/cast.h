// Dtype conversion for kernels that compute in one dtype and return another
// (dot_general's preferred_element_type, argmax's index dtype).
#pragma once
#include "meshsim/core/tensor.h"

namespace meshsim {

// `t` converted to `dtype`, the one home of casts (convert_element_type's
// kernel; XLA's semantics: float -> int saturates, NaN -> 0); `t` itself when
// it already has that dtype.
Tensor cast(const Tensor& t, DType dtype);

}  // namespace meshsim
