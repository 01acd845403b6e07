// A kernel's results as Tensors, each moved in. `Tensors{t}` would copy every
// result out of its initializer list, and a Tensor copy allocates its shape
// and strides: on the small blocks of a simulated device that costs about as
// much as the kernel itself.
#pragma once
#include <utility>

#include "meshsim/ir/primitive.h"

namespace meshsim {

template <class... T>
Tensors as_tensors(T&&... results) {
  Tensors out;
  out.reserve(sizeof...(T));
  (out.push_back(std::forward<T>(results)), ...);
  return out;
}

}  // namespace meshsim
