#include "meshsim/kernels/fused_multiply_add.h"

#include <array>
#include <cmath>

#include <xsimd/xsimd.hpp>

#include "meshsim/core/error.h"
#include "meshsim/kernels/xla_math.h"

namespace meshsim {
namespace {

// One operand's elements: contiguous, or one value repeated (stride 0).
template <class T>
struct Operand {
  const T* data;
  bool repeated;
  xsimd::batch<T> load(int64_t i) const {
    return repeated ? xsimd::batch<T>(*data) : xsimd::batch<T>::load_unaligned(data + i);
  }
  T at(int64_t i) const { return repeated ? *data : data[i]; }
};

template <class T>
void multiply_add_loop(const Operand<T>& a, const Operand<T>& b, const Operand<T>& c, T* out, int64_t n) {
  constexpr int64_t kLanes = xsimd::batch<T>::size;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    xla_math::fused_mul_add(a.load(i), b.load(i), c.load(i)).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = std::fma(a.at(i), b.at(i), c.at(i));
}

}  // namespace

void fused_multiply_add_row(const float* a, const float* b, const float* c, float* out, int64_t n) {
  multiply_add_loop<float>({a, false}, {b, false}, {c, false}, out, n);
}

Tensor fused_multiply_add(const Tensor& a, const Tensor& b, const Tensor& c, const Shape& shape) {
  const DType dtype = a.dtype();
  if (dtype != DType::Float32 && dtype != DType::Float64)
    fail<TypeError>("fused_multiply_add takes float32 or float64 operands, got ", dtype_name(dtype));
  Tensor out = Tensor::empty(dtype, shape);
  const bool scalar_result = shape.empty();
  std::array<Tensor, 3> dense;
  const std::array<const Tensor*, 3> in{&a, &b, &c};
  for (size_t k = 0; k < 3; ++k) {
    // A size-1 dim beside a larger one (an implicit broadcast) is read as its copies.
    const Tensor sized = in[k]->ndim() == 0 || in[k]->shape() == shape ? *in[k] : in[k]->broadcast_to(shape);
    dense[k] = sized.ndim() == 0 || sized.is_contiguous() ? sized : sized.contiguous();
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto operand = [&](size_t k) {
      return Operand<T>{dense[k].template data<T>(), !scalar_result && dense[k].ndim() == 0};
    };
    multiply_add_loop<T>(operand(0), operand(1), operand(2), out.data<T>(), out.size());
  };
  if (dtype == DType::Float32) run(float{});
  else run(double{});
  return out;
}

}  // namespace meshsim
