// Reductions in the order of the loops XLA on CPU emits for them: each output
// folds its reduced elements one by one from the identity, in row-major order
// over the reduced dimensions. A reduced dimension longer than 32 is first cut
// into windows of 32 (XLA's tree reduction), the padding split evenly before
// and after, the lower half rounded down; each window is folded, and the
// window results are reduced again the same way. For narrow floats (bfloat16,
// float16, float8) every step is computed in float32 and rounded back to the
// narrow type (`round`); float32/float64/complex sums round in their own type
// (`round` is the identity). A pairwise sum differs from this by many units
// when the terms cancel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "meshsim/core/tensor.h"

namespace meshsim {

namespace ordered_reduce_detail {

constexpr int64_t kWindow = 32;

// Calls f(offset) for the points of an odometer over `lo[j] <= i[j] < hi[j]`,
// the last dimension fastest, offset = sum of i[j] * strides[j].
template <class F>
void for_each_point(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                    const std::vector<int64_t>& strides, int64_t base, F&& f) {
  const size_t n = lo.size();
  for (size_t j = 0; j < n; ++j)
    if (lo[j] >= hi[j]) return;
  std::vector<int64_t> i(lo);
  int64_t off = base;
  for (size_t j = 0; j < n; ++j) off += lo[j] * strides[j];
  while (true) {
    f(off);
    size_t j = n;
    while (j-- > 0) {
      if (++i[j] < hi[j]) {
        off += strides[j];
        break;
      }
      off -= (i[j] - 1 - lo[j]) * strides[j];
      i[j] = lo[j];
    }
    if (j == static_cast<size_t>(-1)) return;
  }
}

}  // namespace ordered_reduce_detail

// x: the elements (any strides); reduced: the dimensions folded; round: the
// rounding after each step (T -> T). Returns the contiguous result over the
// kept dimensions.
template <class T, class Op, class Round>
std::vector<T> ordered_reduce(const T* x, const Shape& shape, const Strides& strides,
                              const std::vector<bool>& reduced, const Op& op, T identity,
                              const Round& round) {
  using namespace ordered_reduce_detail;
  std::vector<int64_t> kept_size, kept_stride, red_size, red_stride;
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? red_size : kept_size).push_back(shape[d]);
    (reduced[d] ? red_stride : kept_stride).push_back(strides[d]);
  }
  const bool tree = std::any_of(red_size.begin(), red_size.end(), [](int64_t n) { return n > kWindow; });
  if (!tree) {
    std::vector<T> out;
    const std::vector<int64_t> zeros_k(kept_size.size(), 0), zeros_r(red_size.size(), 0);
    for_each_point(zeros_k, kept_size, kept_stride, 0, [&](int64_t base) {
      T acc = identity;
      for_each_point(zeros_r, red_size, red_stride, base,
                     [&](int64_t off) { acc = round(op(acc, x[off])); });
      out.push_back(acc);
    });
    return out;
  }
  // Windows of 32 along every reduced dimension: the window results keep the
  // dimension order (kept and reduced interleaved as in x), contiguous.
  const size_t nd = shape.size();
  Shape wshape(shape);
  std::vector<int64_t> pad_lo(nd, 0);
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) {
      const int64_t blocks = (shape[d] + kWindow - 1) / kWindow;
      pad_lo[d] = (blocks * kWindow - shape[d]) / 2;
      wshape[d] = blocks;
    }
  Strides wstrides(nd, 1);
  int64_t total = 1;
  for (size_t d = nd; d-- > 0;) {
    wstrides[d] = total;
    total *= wshape[d];
  }
  std::vector<T> windows(static_cast<size_t>(total));
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, base = 0;
    std::vector<int64_t> lo(red_size.size()), hi(red_size.size());
    size_t r = red_size.size();
    for (size_t d = nd; d-- > 0;) {
      const int64_t i = rest % wshape[d];
      rest /= wshape[d];
      if (!reduced[d]) {
        base += i * strides[d];
        continue;
      }
      --r;
      const int64_t start = i * kWindow - pad_lo[d];  // first source index of the window
      lo[r] = std::max<int64_t>(start, 0);
      hi[r] = std::min<int64_t>(start + kWindow, shape[d]);
    }
    T acc = identity;
    for_each_point(lo, hi, red_stride, base, [&](int64_t off) { acc = round(op(acc, x[off])); });
    windows[flat] = acc;
  }
  return ordered_reduce(windows.data(), wshape, wstrides, reduced, op, identity, round);
}

}  // namespace meshsim
