// Elementwise loops over any strides with a contiguous fast path that the
// compiler vectorises.
#pragma once
#include "meshsim/core/tensor.h"
#include "meshsim/kernels/strided.h"

namespace meshsim {

template <class In, class Out, class Op>
Tensor map_unary(const Tensor& x, DType out_dtype, Op op) {
  Tensor out = Tensor::empty(out_dtype, x.shape());
  const In* a = x.data<In>();
  Out* o = out.data<Out>();
  if (x.is_contiguous()) {
    const int64_t n = x.size();
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i]);
  } else {
    int64_t k = 0;
    for_each_offset(x.shape(), x.strides(), [&](int64_t off) { o[k++] = op(a[off]); });
  }
  return out;
}

template <class In, class Out, class Op>
Tensor map_binary(const Tensor& x, const Tensor& y, DType out_dtype, Op op) {
  Tensor out = Tensor::empty(out_dtype, x.shape());
  const In* a = x.data<In>();
  const In* b = y.data<In>();
  Out* o = out.data<Out>();
  if (x.is_contiguous() && y.is_contiguous()) {
    const int64_t n = x.size();
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else {
    int64_t k = 0;
    for_each_offsets<2>(x.shape(), {&x.strides(), &y.strides()},
                        [&](const std::array<int64_t, 2>& off) { o[k++] = op(a[off[0]], b[off[1]]); });
  }
  return out;
}

}  // namespace meshsim
