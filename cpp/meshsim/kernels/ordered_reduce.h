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
// Windows of one run folded side by side: independent accumulators, so the
// additions of neighbouring windows overlap instead of waiting on each other.
constexpr int64_t kWindowsAtOnce = 4;
// A kept last dimension shorter than this (the parts of complex numbers) is
// walked outside the reduced dimension before it, whose run then becomes the
// inner loop: a pass per element pair costs more than the pair's additions.
constexpr int64_t kShortKept = 8;

// One loop of the pass: its length, the element stride in the operand, and
// for a reduced dimension the accumulator of element i, (i + pad_lo) / window
// (window 0 when the dimension is not cut), `acc_stride` apart.
struct Loop {
  int64_t size, in_stride, acc_stride;
  bool reduced;
  int64_t pad_lo, window;
  int64_t acc_index(int64_t i) const { return reduced ? (window ? (i + pad_lo) / window : 0) : i; }
};

// out[k * acc_step] = fold of the run's elements of window k (all one window
// when `window` is 0), each from its accumulator's value, in index order.
template <class T, class Op, class Round>
void fold_run(const T* in, int64_t n, int64_t step, const Loop& run, T* out, const Op& op,
              const Round& round) {
  auto fold = [&](int64_t lo, int64_t hi, T* a) {
    T v = *a;
    for (int64_t i = lo; i < hi; ++i) v = round(op(v, in[i * step]));
    *a = v;
  };
  if (run.window == 0) return fold(0, n, out);
  const int64_t w = run.window, acc_step = run.acc_stride;
  // Window k covers [k * w - pad_lo, (k + 1) * w - pad_lo) within [0, n).
  fold(0, std::min(n, w - run.pad_lo), out);
  int64_t k = 1;
  for (; (k + kWindowsAtOnce) * w - run.pad_lo <= n; k += kWindowsAtOnce) {
    const T* base = in + (k * w - run.pad_lo) * step;
    T a[kWindowsAtOnce];
    for (int64_t g = 0; g < kWindowsAtOnce; ++g) a[g] = out[(k + g) * acc_step];
    for (int64_t i = 0; i < w; ++i)
      for (int64_t g = 0; g < kWindowsAtOnce; ++g) a[g] = round(op(a[g], base[(g * w + i) * step]));
    for (int64_t g = 0; g < kWindowsAtOnce; ++g) out[(k + g) * acc_step] = a[g];
  }
  for (; k * w - run.pad_lo < n; ++k)
    fold(k * w - run.pad_lo, std::min(n, (k + 1) * w - run.pad_lo), out + k * acc_step);
}

}  // namespace ordered_reduce_detail

// x: the elements (any strides); reduced: the dimensions folded; round: the
// rounding after each step (T -> T). Writes the contiguous result over the
// kept dimensions to `result` (the kernel's output buffer: without windows the
// accumulators are the results themselves, and nothing is copied).
//
// One pass over x folds every element into its accumulator (its window's,
// when windowed). Each accumulator receives its elements in row-major order
// over the reduced dimensions, the order XLA folds them in, whatever the
// order of the kept dimensions' loops: so the results are those of folding
// each output on its own. Size-1 dimensions are dropped, neighbouring kept
// dimensions merged, and a short kept last dimension walked outside the
// reduced one before it; when the last loop is kept, the innermost loop
// updates consecutive accumulators and vectorises.
template <class T, class Op, class Round>
void ordered_reduce(const T* x, const Shape& shape, const Strides& strides, const std::vector<bool>& reduced,
                    const Op& op, T identity, const Round& round, T* result) {
  using ordered_reduce_detail::kWindow;
  using ordered_reduce_detail::Loop;
  const size_t nd = shape.size();
  if (nd == 0) {
    result[0] = round(op(identity, x[0]));
    return;
  }
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
  int64_t kept = 1;
  for (size_t d = 0; d < nd; ++d)
    if (!reduced[d]) kept *= shape[d];
  std::fill_n(result, kept, identity);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return;
  std::vector<T> windows(tree ? static_cast<size_t>(total) : 0, identity);
  T* const acc = tree ? windows.data() : result;
  std::vector<Loop> loops;
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;  // index 0: accumulator 0 (a lone element's window)
    Loop l{shape[d], strides[d], acc_strides[d], bool(reduced[d]), pad_lo[d], tree ? kWindow : 0};
    if (!loops.empty()) {
      Loop& o = loops.back();
      if (!l.reduced && !o.reduced && o.in_stride == l.in_stride * l.size &&
          o.acc_stride == l.acc_stride * l.size) {
        o = {o.size * l.size, l.in_stride, l.acc_stride, false, 0, o.window};
        continue;
      }
    }
    loops.push_back(l);
  }
  if (loops.empty()) loops.push_back({1, 1, 1, false, 0, 0});
  const size_t nl = loops.size();
  if (nl >= 2 && !loops[nl - 1].reduced && loops[nl - 2].reduced &&
      loops[nl - 1].size < ordered_reduce_detail::kShortKept)
    std::swap(loops[nl - 1], loops[nl - 2]);
  const Loop& inner = loops.back();
  const int64_t n = inner.size, step = inner.in_stride;
  std::vector<int64_t> at(nl, 0);  // the index over the outer loops (the last stays 0)
  while (true) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d + 1 < nl; ++d) {
      src += at[d] * loops[d].in_stride;
      dst += loops[d].acc_index(at[d]) * loops[d].acc_stride;
    }
    const T* in = x + src;
    T* out = acc + dst;
    if (inner.reduced) {
      ordered_reduce_detail::fold_run(in, n, step, inner, out, op, round);
    } else if (step == 1 && inner.acc_stride == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = round(op(out[i], in[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i * inner.acc_stride] = round(op(out[i * inner.acc_stride], in[i * step]));
    }
    size_t d = nl - 1;
    while (d-- > 0) {
      if (++at[d] < loops[d].size) break;
      at[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  if (tree) ordered_reduce(acc, acc_shape, acc_strides, reduced, op, identity, round, result);
}

}  // namespace meshsim
