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

}  // namespace ordered_reduce_detail

// x: the elements (any strides); reduced: the dimensions folded; round: the
// rounding after each step (T -> T). Returns the contiguous result over the
// kept dimensions.
//
// One pass over x in row-major order folds every element into its
// accumulator: an output's elements (a window's, when windowed) arrive in
// row-major order over the reduced dimensions, the order XLA folds them in,
// so the results are those of folding each output on its own, without a walk
// (and its index vectors) per output. When the last dimension is kept, the
// innermost loop updates consecutive accumulators and vectorises.
template <class T, class Op, class Round>
std::vector<T> ordered_reduce(const T* x, const Shape& shape, const Strides& strides,
                              const std::vector<bool>& reduced, const Op& op, T identity,
                              const Round& round) {
  using ordered_reduce_detail::kWindow;
  const size_t nd = shape.size();
  if (nd == 0) return {round(op(identity, x[0]))};
  bool tree = false;
  for (size_t d = 0; d < nd; ++d) tree = tree || (reduced[d] && shape[d] > kWindow);
  // The accumulators, contiguous over `acc_shape`: a kept dimension keeps its
  // length; a reduced one has one entry per window of 32 (the padding split
  // evenly before and after, the lower half rounded down: XLA's tree
  // reduction) when some reduced dimension is longer than 32, else one.
  Shape acc_shape(shape);
  std::vector<int64_t> pad_lo(nd, 0);
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) {
      const int64_t blocks = tree ? (shape[d] + kWindow - 1) / kWindow : 1;
      pad_lo[d] = tree ? (blocks * kWindow - shape[d]) / 2 : 0;
      acc_shape[d] = blocks;
    }
  Strides acc_strides(nd, 1);
  int64_t total = 1;
  for (size_t d = nd; d-- > 0;) {
    acc_strides[d] = total;
    total *= acc_shape[d];
  }
  std::vector<T> acc(static_cast<size_t>(total), identity);
  const bool no_elements = std::find(shape.begin(), shape.end(), 0) != shape.end();
  // The accumulator of index i along dimension d.
  auto acc_index = [&](size_t d, int64_t i) {
    return reduced[d] ? (tree ? (i + pad_lo[d]) / kWindow : 0) : i;
  };
  const size_t last = nd - 1;
  const int64_t n = shape[last], step = strides[last];
  std::vector<int64_t> at(nd, 0);  // the index over the outer dimensions (the last stays 0)
  while (!no_elements) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < last; ++d) {
      src += at[d] * strides[d];
      dst += acc_index(d, at[d]) * acc_strides[d];
    }
    const T* in = x + src;
    T* out = acc.data() + dst;
    if (!reduced[last]) {
      for (int64_t i = 0; i < n; ++i) out[i] = round(op(out[i], in[i * step]));
    } else {
      for (int64_t i = 0; i < n;) {
        const int64_t block = acc_index(last, i);
        const int64_t stop = tree ? std::min(n, (block + 1) * kWindow - pad_lo[last]) : n;
        T a = out[block];
        for (; i < stop; ++i) a = round(op(a, in[i * step]));
        out[block] = a;
      }
    }
    size_t d = last;
    while (d-- > 0) {
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  if (!tree) return acc;
  return ordered_reduce(acc.data(), acc_shape, acc_strides, reduced, op, identity, round);
}

}  // namespace meshsim
