// Dtype conversion for kernels that compute in one dtype and return another
// (dot_general's preferred_element_type, argmax's index dtype).
#pragma once
#include <utility>

#include "meshsim/core/tensor.h"

namespace meshsim {

// `t` converted to `dtype`, the one home of casts (convert_element_type's
// kernel; XLA's semantics: float -> int saturates, NaN -> 0); `t` itself when
// it already has that dtype.
Tensor cast(const Tensor& t, DType dtype);
// A temporary that has the dtype already is passed on, not copied (a Tensor
// copy allocates its shape and strides).
inline Tensor cast(Tensor&& t, DType dtype) {
  if (t.dtype() == dtype) return std::move(t);
  return cast(static_cast<const Tensor&>(t), dtype);
}

// `t` itself when it has `dtype`, else its conversion, kept in `converted`.
inline const Tensor& in_dtype(const Tensor& t, DType dtype, Tensor& converted) {
  if (t.dtype() == dtype) return t;
  converted = cast(t, dtype);
  return converted;
}

}  // namespace meshsim
