// Reduction loops over strided views. Accumulation stays in the element type
// (float32 sums in float32, as XLA on CPU) but is pairwise, so the rounding
// error grows with log(n) rather than n. Two loop shapes:
//  - the innermost dimension is reduced: each output is a reduction of a run,
//    vectorised over independent vector accumulators;
//  - the innermost dimension is kept: whole rows are combined element-wise,
//    vectorised along the row, pairwise over the reduced rows.
//
// An Op provides `T identity` and a generic `operator()(V, V)` valid for T and
// for Simd<T>::type; it must be associative (up to rounding), which makes the
// pairwise order legitimate.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "meshsim/core/tensor.h"
#include "meshsim/core/strided.h"

namespace meshsim {

// GCC/Clang vector extensions: an op written once for scalars and vectors
// vectorises reliably (a NaN-propagating max, a select on two comparisons, does
// not auto-vectorise in scalar form). 16 bytes: the x86-64 baseline (SSE2).
template <class T>
constexpr bool kSimd = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
template <class T>
struct Simd {
  typedef T type __attribute__((vector_size(16)));
  static constexpr int64_t lanes = 16 / sizeof(T);
  static type load(const T* p) { type v; std::memcpy(&v, p, 16); return v; }
  static void store(T* p, type v) { std::memcpy(p, &v, 16); }
  static type splat(T x) { type v; for (int64_t l = 0; l < lanes; ++l) v[l] = x; return v; }
};

// acc[j] = op(acc[j], x[j]) for j < n.
template <class T, class Op>
void combine(T* acc, const T* x, int64_t n, const Op& op) {
  int64_t j = 0;
  if constexpr (kSimd<T>) {
    using S = Simd<T>;
    for (; j + S::lanes <= n; j += S::lanes) S::store(acc + j, op(S::load(acc + j), S::load(x + j)));
  }
  for (; j < n; ++j) acc[j] = op(acc[j], x[j]);
}

namespace reduce_detail {

constexpr int64_t kVectors = 4;      // independent vector accumulators of a run
constexpr int64_t kRunBlock = 512;   // run length reduced without splitting
constexpr int64_t kRowBlock = 8;     // rows combined without splitting
constexpr int64_t kTile = 4096;      // row elements handled at once (a page of floats)
constexpr int64_t kShortRun = 32;    // runs shorter than this are reduced across rows

// The leaves of the pairwise reduction: a run of at most kRunBlock elements,
// a multiple of kVectors vectors, folded into kVectors vector accumulators.
// Two leaves are folded in one loop when they can be: their accumulators are
// independent, so twice as many additions are in flight, and each leaf's
// result is the one it has alone.
template <class T, class Op>
void reduce_leaves(const T* const* x, const int64_t* n, int64_t count, typename Simd<T>::type* out,
                   const Op& op) {
  using S = Simd<T>;
  constexpr int64_t step = kVectors * S::lanes;
  typename S::type v[2][kVectors];
  for (int64_t j = 0; j < count; ++j)
    for (int64_t k = 0; k < kVectors; ++k) v[j][k] = S::load(x[j] + k * S::lanes);
  const int64_t common = count == 2 ? std::min(n[0], n[1]) : n[0];
  int64_t i = step;
  for (; i < common; i += step)
    for (int64_t j = 0; j < count; ++j)
      for (int64_t k = 0; k < kVectors; ++k) v[j][k] = op(v[j][k], S::load(x[j] + i + k * S::lanes));
  static_assert(kVectors == 4, "the final tree below combines four accumulators");
  for (int64_t j = 0; j < count; ++j) {
    for (int64_t r = i; r < n[j]; r += step)
      for (int64_t k = 0; k < kVectors; ++k) v[j][k] = op(v[j][k], S::load(x[j] + r + k * S::lanes));
    out[j] = op(op(v[j][0], v[j][1]), op(v[j][2], v[j][3]));
  }
}

// Pairwise reduction of a contiguous run whose length is a multiple of
// kVectors vectors, kept in vector form up to the top (finishing every block
// to a scalar would stall on the horizontal step).
template <class T, class Op>
typename Simd<T>::type reduce_run_simd(const T* x, int64_t n, const Op& op) {
  using S = Simd<T>;
  constexpr int64_t step = kVectors * S::lanes;
  typename S::type v[2];
  if (n > kRunBlock) {
    const int64_t half = n / 2 / step * step;
    if (n - half > kRunBlock)
      return op(reduce_run_simd(x, half, op), reduce_run_simd(x + half, n - half, op));
    const T* leaves[2] = {x, x + half};
    const int64_t sizes[2] = {half, n - half};
    reduce_leaves(leaves, sizes, 2, v, op);
    return op(v[0], v[1]);
  }
  reduce_leaves(&x, &n, 1, v, op);
  return v[0];
}

// Pairwise reduction of x[0], x[s], ..., x[(n-1)s]; kUnit means s == 1.
template <bool kUnit, class T, class Op>
T reduce_run(const T* x, int64_t n, int64_t s, const Op& op) {
  T acc = op.identity;
  int64_t i = 0;
  if constexpr (kUnit && kSimd<T>) {
    constexpr int64_t step = kVectors * Simd<T>::lanes;
    if (n >= step) {
      i = n / step * step;
      auto v = reduce_run_simd(x, i, op);
      for (int64_t l = 0; l < Simd<T>::lanes; ++l) acc = op(acc, T(v[l]));
    }
  } else if (n > kRunBlock) {
    const int64_t half = n / 2;
    return op(reduce_run<kUnit>(x, half, s, op), reduce_run<kUnit>(x + half * s, n - half, s, op));
  }
  for (; i < n; ++i) acc = op(acc, x[i * (kUnit ? 1 : s)]);
  return acc;
}

// Max, min and the bitwise ops (`Op::kAnyOrder`) give the same result in any
// order, up to which NaN a float max or min returns. Their runs are reduced
// over more and wider accumulators than the pairwise sums (whose order is
// fixed), hiding the latency of a NaN-propagating select; a NaN result is
// recomputed in the pairwise order, which decides which NaN it is.
template <class Op, class = void>
struct any_order : std::false_type {};
template <class Op>
struct any_order<Op, std::void_t<decltype(Op::kAnyOrder)>> : std::bool_constant<Op::kAnyOrder> {};

template <class T, class Op>
T reduce_run_any_order(const T* x, int64_t n, const Op& op) {
  typedef T V __attribute__((vector_size(32)));
  constexpr int64_t lanes = 32 / sizeof(T), accumulators = 8, step = lanes * accumulators;
  if (n < step) return reduce_run<true>(x, n, 1, op);
  auto load = [](const T* p) { V v; std::memcpy(&v, p, sizeof(V)); return v; };
  V v[accumulators];
  for (int64_t k = 0; k < accumulators; ++k) v[k] = load(x + k * lanes);
  int64_t i = step;
  for (; i + step <= n; i += step)
    for (int64_t k = 0; k < accumulators; ++k) v[k] = op(v[k], load(x + i + k * lanes));
  for (int64_t k = 1; k < accumulators; ++k) v[0] = op(v[0], v[k]);
  T acc = T(v[0][0]);
  for (int64_t l = 1; l < lanes; ++l) acc = op(acc, T(v[0][l]));
  for (; i < n; ++i) acc = op(acc, x[i]);
  if constexpr (std::is_floating_point_v<T>)
    if (acc != acc) return reduce_run<true>(x, n, 1, op);
  return acc;
}

// Maps a flat index over some dimensions to an element offset.
struct Unravel {
  Shape sizes;
  Strides strides;
  int64_t operator()(int64_t flat) const {
    int64_t off = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      off += (flat % sizes[d]) * strides[d];
      flat /= sizes[d];
    }
    return off;
  }
};

// acc[0..w) = op over rows [lo, hi) of x, row r starting at x + rows(r),
// elements `s` apart. scratch holds one buffer of `tile` (>= w) elements per
// recursion level.
template <bool kUnit, class T, class Op>
void reduce_rows(T* acc, const T* x, const Unravel& rows, int64_t lo, int64_t hi, int64_t w,
                 int64_t s, T* scratch, int64_t tile, const Op& op) {
  if (hi - lo > kRowBlock) {
    const int64_t mid = lo + (hi - lo) / 2;
    reduce_rows<kUnit>(acc, x, rows, lo, mid, w, s, scratch + tile, tile, op);
    reduce_rows<kUnit>(scratch, x, rows, mid, hi, w, s, scratch + tile, tile, op);
    combine(acc, scratch, w, op);
    return;
  }
  const T* row = x + rows(lo);
  for (int64_t j = 0; j < w; ++j) acc[j] = row[j * (kUnit ? 1 : s)];
  for (int64_t r = lo + 1; r < hi; ++r) {
    row = x + rows(r);
    if constexpr (kUnit) combine(acc, row, w, op);
    else for (int64_t j = 0; j < w; ++j) acc[j] = op(acc[j], row[j * s]);
  }
}

// One dimension of the loop nest: its size, input stride and output stride
// (0 for a reduced dimension).
struct Dim {
  int64_t size, in_stride, out_stride;
  bool reduced;
};

// The loop nest of a reduction: size-1 dimensions dropped, dimensions ordered
// by decreasing input stride (so a transposed view is read in memory order,
// broadcast dimensions outermost), and neighbours merged where the strides
// allow.
inline std::vector<Dim> loop_nest(const Tensor& x, const std::vector<bool>& reduced) {
  std::vector<Dim> dims;
  int64_t out_stride = 1;
  for (int64_t d = x.ndim(); d-- > 0;) {
    Dim dim{x.shape()[d], x.strides()[d], reduced[d] ? 0 : out_stride, reduced[d]};
    if (!reduced[d]) out_stride *= dim.size;
    if (dim.size != 1) dims.insert(dims.begin(), dim);
  }
  auto key = [](const Dim& d) {
    return d.in_stride == 0 ? std::numeric_limits<int64_t>::max() : std::abs(d.in_stride);
  };
  std::stable_sort(dims.begin(), dims.end(),
                   [&](const Dim& a, const Dim& b) { return key(a) > key(b); });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& o = merged.back();
      if (o.reduced == d.reduced && o.in_stride == d.in_stride * d.size &&
          o.out_stride == d.out_stride * d.size) {
        o = {o.size * d.size, d.in_stride, d.out_stride, d.reduced};
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.empty()) merged.push_back({1, 1, 0, true});  // a single element
  return merged;
}

inline void split_dims(const std::vector<Dim>& dims, Shape& shape, Strides& in, Strides& out) {
  for (const Dim& d : dims) {
    shape.push_back(d.size);
    in.push_back(d.in_stride);
    out.push_back(d.out_stride);
  }
}

// Innermost dimension reduced: out[o] = op(out[o], run) for every run.
template <class T, class Op>
void reduce_runs(const T* x, T* out, const std::vector<Dim>& dims, const Op& op) {
  const Dim& run = dims.back();
  std::vector<Dim> outer(dims.begin(), dims.end() - 1);
  Shape shape;
  Strides in, os;
  split_dims(outer, shape, in, os);
  for_each_offsets<2>(shape, {&in, &os}, [&](const std::array<int64_t, 2>& off) {
    const T* p = x + off[0];
    T r;
    if (run.in_stride != 1) r = reduce_run<false>(p, run.size, run.in_stride, op);
    else if constexpr (kSimd<T> && any_order<Op>::value) r = reduce_run_any_order(p, run.size, op);
    else r = reduce_run<true>(p, run.size, 1, op);
    out[off[1]] = op(out[off[1]], r);
  });
}

// Innermost dimension kept: rows are combined, tile by tile.
template <class T, class Op>
void reduce_columns(const T* x, T* out, const std::vector<Dim>& dims, const Op& op) {
  const Dim& row = dims.back();
  std::vector<Dim> kept, reduced;
  for (size_t i = 0; i + 1 < dims.size(); ++i) (dims[i].reduced ? reduced : kept).push_back(dims[i]);
  Unravel rows;
  int64_t nrows = 1;
  for (const Dim& d : reduced) {
    rows.sizes.push_back(d.size);
    rows.strides.push_back(d.in_stride);
    nrows *= d.size;
  }
  int64_t levels = 2;
  for (int64_t n = nrows; n > kRowBlock; n = (n + 1) / 2) ++levels;
  // Rows no longer than a tile need buffers only as long as a row: short
  // ones fit on the stack (a heap block of a tile per level, 32 KiB for
  // floats, costs more than reducing a few hundred elements, and makes
  // malloc consolidate its free lists on every call).
  const int64_t tile = std::min(kTile, row.size);
  constexpr int64_t kStackElems = 2048 / sizeof(T) > 0 ? 2048 / sizeof(T) : 1;
  T on_stack[kStackElems];
  std::unique_ptr<T[]> on_heap;  // not vector<T>: T may be bool
  T* scratch = on_stack;
  if (levels * tile > kStackElems) {
    on_heap.reset(new T[levels * tile]);
    scratch = on_heap.get();
  }
  Shape shape;
  Strides in, os;
  split_dims(kept, shape, in, os);
  for_each_offsets<2>(shape, {&in, &os}, [&](const std::array<int64_t, 2>& off) {
    for (int64_t j0 = 0; j0 < row.size; j0 += kTile) {
      const int64_t w = std::min(kTile, row.size - j0);
      const T* base = x + off[0] + j0 * row.in_stride;
      T* acc = scratch;
      if (row.in_stride == 1)
        reduce_rows<true>(acc, base, rows, 0, nrows, w, 1, acc + tile, tile, op);
      else
        reduce_rows<false>(acc, base, rows, 0, nrows, w, row.in_stride, acc + tile, tile, op);
      T* o = out + off[1] + j0 * row.out_stride;
      for (int64_t j = 0; j < w; ++j) o[j * row.out_stride] = acc[j];
    }
  });
}

}  // namespace reduce_detail

// Reduces `x` over the dimensions flagged in `reduced` into `out`
// (contiguous, the kept dimensions in order).
template <class T, class Op>
void reduce_into(const Tensor& x, const std::vector<bool>& reduced, Tensor& out, const Op& op) {
  T* o = out.data<T>();
  if (out.size() == 0) return;
  std::fill(o, o + out.size(), op.identity);
  if (x.size() == 0) return;  // an empty reduced dimension: the identity
  auto dims = reduce_detail::loop_nest(x, reduced);
  const size_t n = dims.size();
  // Short runs under a kept dimension: reducing across rows of the kept
  // dimension (read with a stride) beats a call per tiny run.
  if (n >= 2 && dims[n - 1].reduced && !dims[n - 2].reduced &&
      dims[n - 1].size < reduce_detail::kShortRun)
    std::swap(dims[n - 1], dims[n - 2]);
  if (dims.back().reduced) reduce_detail::reduce_runs(x.data<T>(), o, dims, op);
  else reduce_detail::reduce_columns(x.data<T>(), o, dims, op);
}

}  // namespace meshsim
