// Iteration over strided N-d views: the one loop of core's strided copy (tensor.cpp)
// and of every generic kernel.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "meshsim/core/shape.h"

namespace meshsim {

// Calls f(offset) for every element of a view in row-major order, where
// offset is the element offset given `strides`. The innermost dimension runs
// as a tight loop.
template <class F>
void for_each_offset(const Shape& shape, const Strides& strides, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd == 0) { f(int64_t{0}); return; }
  for (int64_t d : shape) if (d == 0) return;
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1], inner_stride = strides[nd - 1];
  int64_t base = 0;
  while (true) {
    for (int64_t i = 0; i < inner; ++i) f(base + i * inner_stride);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      base += strides[d];
      if (++idx[d] < shape[d]) break;
      base -= strides[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Same walk over N views of one shape at once: f(std::array<int64_t, N> offsets).
template <size_t N, class F>
void for_each_offsets(const Shape& shape, const std::array<const Strides*, N>& strides, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::array<int64_t, N> base{};
  if (nd == 0) { f(base); return; }
  for (int64_t d : shape) if (d == 0) return;
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = (*strides[k])[nd - 1];
  while (true) {
    std::array<int64_t, N> off = base;
    for (int64_t i = 0; i < inner; ++i) {
      f(off);
      for (size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) base[k] += (*strides[k])[d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace meshsim
