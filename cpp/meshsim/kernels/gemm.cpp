// Blocked as BLIS blocks a product: a block of B (one depth block x up to
// kBlockCols columns) is packed once into column panels, each block of A's
// rows (kBlockRows) into row panels, and the register tile
// (kernels/gemm_tile.h) runs over every pair. Depth blocks are those of the
// caller's DepthOrder, added in order, and padded edge tiles do the same
// arithmetic per lane, so only the order is part of the result
// (kernels/gemm.h).
#include "meshsim/kernels/gemm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "meshsim/core/cancel.h"
#include "meshsim/core/denormals.h"
#include "meshsim/kernels/gemm_tile.h"

namespace meshsim {
namespace {

using gemm_tile::TileKernel;

constexpr int64_t kBlockDepth = 256, kBlockRows = 96, kBlockCols = 3072;
// Below this many multiply-adds a product runs on the calling thread alone:
// splitting products of 2^18-2^19 (the 128-token layers of the zoo's GPT on
// one device) over TBB's workers made that step slower, not faster.
constexpr int64_t kParallelMacs = int64_t{1} << 21;

template <class T>
TileKernel<T> baseline_tile() {
  return gemm_tile::tile_kernel<T, xsimd::default_arch>();
}

bool has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

template <class T>
const TileKernel<T>& tile_for_this_processor() {
  static const TileKernel<T> kernel = [] {
    if (has_avx2_fma()) {
      if constexpr (std::is_same_v<T, float>) return gemm_tile::avx2_tile_f32();
      else return gemm_tile::avx2_tile_f64();
    }
    return baseline_tile<T>();
  }();
  return kernel;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Room for one packed operand, reused from product to product: a small
// product's packing takes as long as its arithmetic, and allocating (and
// zero-filling) its buffers per call cost as much again. The contents are
// never read before packing writes them.
template <class T>
class PackBuffer {
 public:
  void reserve(size_t n) {
    if (n > size_) {
      data_.reset(new T[n]);
      size_ = n;
    }
  }
  T* data() { return data_.get(); }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

// This thread's buffers for a product it runs alone: nothing in that runs
// other tasks on the thread meanwhile, so no other product can take them.
// Such a product has fewer than kParallelMacs multiply-adds, so they stay
// small (about that many elements at most).
template <class T>
struct SerialPackBuffers {
  PackBuffer<T> a, b;
  static SerialPackBuffers& mine() {
    thread_local SerialPackBuffers buffers;
    return buffers;
  }
};

// B[k0 : k0 + depth, j0 : j0 + width] as panels of `panel` columns, row after row.
// A product of a few rows packs as many elements of B as it multiplies-adds
// per row, so the panels of the AVX2 tile's width (`Panel`) are filled with
// fixed-size copies (a call or a string instruction costs more than a row of
// a panel), and a B read down its columns (a transposed operand) is read
// along them.
template <int Panel, class T>
void pack_b_panels(const StridedMatrix<T>& b, int64_t k0, int64_t depth, int64_t j0, int64_t width, int panel,
                   T* out) {
  if (Panel) panel = Panel;
  for (int64_t jp = 0; jp < width; jp += panel) {
    const int64_t cols = std::min<int64_t>(panel, width - jp);
    const T* first = b.data + k0 * b.row_stride + (j0 + jp) * b.col_stride;
    if (b.col_stride != 1 && b.row_stride == 1) {
      if (cols < panel) std::memset(out, 0, depth * panel * sizeof(T));
      for (int64_t j = 0; j < cols; ++j) {
        const T* src = first + j * b.col_stride;
        for (int64_t k = 0; k < depth; ++k) out[k * panel + j] = src[k];
      }
      out += depth * panel;
      continue;
    }
    for (int64_t k = 0; k < depth; ++k) {
      const T* src = first + k * b.row_stride;
      if (Panel) {
        if (cols == Panel && b.col_stride == 1) {
          std::memcpy(out, src, Panel * sizeof(T));
        } else {
          std::memset(out, 0, Panel * sizeof(T));
          for (int64_t j = 0; j < cols; ++j) out[j] = src[j * b.col_stride];
        }
        out += panel;
        continue;
      }
      int64_t j = 0;
      if (b.col_stride == 1) {
        std::memcpy(out, src, cols * sizeof(T));  // B's rows never overlap the panels
        j = cols;
      } else
        for (; j < cols; ++j) out[j] = src[j * b.col_stride];
      for (; j < panel; ++j) out[j] = T(0);
      out += panel;
    }
  }
}

template <class T>
void pack_b(const StridedMatrix<T>& b, int64_t k0, int64_t depth, int64_t j0, int64_t width, int panel, T* out) {
  constexpr int kAvx2Panel = 32 / sizeof(T) * 2;  // two AVX registers (gemm_tile.h)
  if (panel == kAvx2Panel) pack_b_panels<kAvx2Panel>(b, k0, depth, j0, width, panel, out);
  else pack_b_panels<0>(b, k0, depth, j0, width, panel, out);
}

// A[i0 : i0 + height, k0 : k0 + depth] as panels of `panel` rows, column after column.
template <class T>
void pack_a(const StridedMatrix<T>& a, int64_t i0, int64_t height, int64_t k0, int64_t depth, int panel, T* out) {
  for (int64_t ip = 0; ip < height; ip += panel) {
    const int64_t rows = std::min<int64_t>(panel, height - ip);
    const T* base = a.data + (i0 + ip) * a.row_stride + k0 * a.col_stride;
    if (rows == gemm_tile::kTileRows && panel == gemm_tile::kTileRows) {
      // A whole panel of the register tile's height: a fixed count of rows,
      // unrolled (small products spend as long packing as multiplying).
      const T* row[gemm_tile::kTileRows];
      for (int r = 0; r < gemm_tile::kTileRows; ++r) row[r] = base + r * a.row_stride;
      for (int64_t k = 0; k < depth; ++k) {
        const int64_t at = k * a.col_stride;
#pragma GCC unroll 6
        for (int r = 0; r < gemm_tile::kTileRows; ++r) out[r] = row[r][at];
        out += gemm_tile::kTileRows;
      }
      continue;
    }
    // A part of a panel: its padding zeroed at once (per column, the
    // compiler makes each few-byte fill a call).
    if (rows < panel) std::memset(out, 0, depth * panel * sizeof(T));
    for (int64_t k = 0; k < depth; ++k) {
      const T* src = base + k * a.col_stride;
      for (int64_t i = 0; i < rows; ++i) out[i] = src[i * a.row_stride];
      out += panel;
    }
  }
}

// Rows [i0, i0 + height) x packed column panels [p0, p1) of one depth block.
template <class T>
void multiply_block(const TileKernel<T>& tile, const StridedMatrix<T>& a, const T* b_packed, int64_t i0,
                    int64_t height, int64_t k0, int64_t depth, int64_t j0, int64_t width, int64_t p0, int64_t p1,
                    T* c, int64_t ldc, PackBuffer<T>& a_packed) {
  const int tr = tile.tile_rows, tc = tile.tile_cols;
  a_packed.reserve(static_cast<size_t>(ceil_div(height, tr) * tr * depth));
  pack_a(a, i0, height, k0, depth, tr, a_packed.data());
  const bool first = k0 == 0;
  T edge[64 * 64];  // one tile, for tiles crossing the matrix's edge
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j = p * tc, cols = std::min<int64_t>(tc, width - j);
    const T* bp = b_packed + p * depth * tc;
    for (int64_t i = 0; i < height; i += tr) {
      const int64_t rows = std::min<int64_t>(tr, height - i);
      const T* ap = a_packed.data() + (i / tr) * depth * tr;
      T* ct = c + (i0 + i) * ldc + j0 + j;
      if (rows == tr && cols == tc) {
        tile.run(depth, ap, bp, ct, ldc, first);
        continue;
      }
      if (!first)
        for (int64_t r = 0; r < rows; ++r) std::copy(ct + r * ldc, ct + r * ldc + cols, edge + r * tc);
      tile.run(depth, ap, bp, edge, tc, first);
      for (int64_t r = 0; r < rows; ++r) std::copy(edge + r * tc, edge + r * tc + cols, ct + r * ldc);
    }
  }
}

// XLA compiles a product over one k as the product of the operands (-0 where
// it is -0), and a matrix times a column as a reduction of separately rounded
// products from +0 (a zero sum is +0); the value of each element does not
// depend on the order here either way.
template <class T>
void outer_product(int64_t rows, int64_t cols, const StridedMatrix<T>& a, const StridedMatrix<T>& b, T* c,
                   int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = a.data[i * a.row_stride] * b.data[j * b.col_stride];
}

template <class T>
void matrix_times_column(int64_t rows, int64_t depth, const StridedMatrix<T>& a, const StridedMatrix<T>& b, T* c,
                         int64_t ldc) {
  // Eight rows' sums at once: independent chains, so each add does not wait for the last.
  constexpr int64_t kRows = 8;
  const int64_t groups = ceil_div(rows, kRows);
  auto sum_rows = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      if (g % 64 == 0) check_cancelled();
      const int64_t i0 = g * kRows, n = std::min(kRows, rows - i0);
      T sum[kRows] = {};
      const T* ai = a.data + i0 * a.row_stride;
      const T* bj = b.data;
      for (int64_t k = 0; k < depth; ++k) {
        const T bk = bj[k * b.row_stride];
        for (int64_t r = 0; r < n; ++r) {
          const T product = ai[r * a.row_stride + k * a.col_stride] * bk;
          sum[r] += product;
        }
      }
      for (int64_t r = 0; r < n; ++r) c[(i0 + r) * ldc] = sum[r];
    }
  };
  check_cancelled();
  if (rows * depth < kParallelMacs) {
    sum_rows(0, groups);
    return;
  }
  parallel_as_caller(groups, 64, sum_rows);
}

// Calls f(k0, size) for each depth block of `order` over [0, depth), in order.
template <class F>
void for_each_depth_block(int64_t depth, const DepthOrder& order, F f) {
  const int64_t chunk = order.chunk > 0 ? order.chunk : depth;
  for (int64_t c0 = 0; c0 < depth; c0 += chunk) {
    const int64_t c1 = std::min(depth, c0 + chunk);
    for (int64_t k0 = c0; k0 < c1; k0 += order.block) f(k0, std::min(order.block, c1 - k0));
  }
}

// One chain of fused multiply-adds per depth block of `order`, by register tiles.
template <class T>
void fused_blocks(int64_t rows, int64_t cols, int64_t depth, const StridedMatrix<T>& a, const StridedMatrix<T>& b,
                  T* c, int64_t ldc, const DepthOrder& order) {
  const TileKernel<T>& tile = tile_for_this_processor<T>();
  const int64_t tc = tile.tile_cols;
  const bool parallel = rows * cols * depth >= kParallelMacs;
  // Packed blocks of B stay within kBlockDepth x kBlockCols elements however
  // long the depth blocks are.
  const int64_t longest = std::min(order.block, depth);
  const int64_t block_cols = std::max(tc, std::min(kBlockCols, kBlockDepth * kBlockCols / longest) / tc * tc);
  // A thread waiting for a parallel product's tasks may run another device's
  // product meanwhile: a parallel product packs B into buffers of its own.
  PackBuffer<T> own_b_packed;
  SerialPackBuffers<T>& serial = SerialPackBuffers<T>::mine();
  PackBuffer<T>& b_packed = parallel ? own_b_packed : serial.b;
  for (int64_t j0 = 0; j0 < cols; j0 += block_cols) {
    const int64_t width = std::min(block_cols, cols - j0), panels = ceil_div(width, tc);
    for_each_depth_block(depth, order, [&](int64_t k0, int64_t kd) {
      check_cancelled();
      b_packed.reserve(static_cast<size_t>(panels * tc * kd));
      pack_b(b, k0, kd, j0, width, static_cast<int>(tc), b_packed.data());
      const int64_t row_blocks = ceil_div(rows, kBlockRows);
      if (!parallel) {
        for (int64_t rb = 0; rb < row_blocks; ++rb) {
          check_cancelled();
          const int64_t i0 = rb * kBlockRows;
          multiply_block(tile, a, b_packed.data(), i0, std::min(kBlockRows, rows - i0), k0, kd, j0, width, 0,
                         panels, c, ldc, serial.a);
        }
        return;
      }
      // Few row blocks: the column panels are split too, so both cores have work.
      const int64_t col_chunks = std::min<int64_t>(panels, ceil_div(8, row_blocks));
      parallel_as_caller(row_blocks * col_chunks, 1, [&](int64_t begin, int64_t end) {
        thread_local PackBuffer<T> task_a_packed;
        for (int64_t task = begin; task < end; ++task) {
          check_cancelled();
          const int64_t rb = task / col_chunks, chunk = task % col_chunks;
          const int64_t i0 = rb * kBlockRows;
          const int64_t p0 = panels * chunk / col_chunks, p1 = panels * (chunk + 1) / col_chunks;
          multiply_block(tile, a, b_packed.data(), i0, std::min(kBlockRows, rows - i0), k0, kd, j0, width, p0,
                         p1, c, ldc, task_a_packed);
        }
      });
    });
  }
}

// Products rounded before they are added, one chain per depth block of
// `order`. Only small products are summed so (kernels/library_dot_order.cpp).
template <class T>
void unfused_blocks(int64_t rows, int64_t cols, int64_t depth, const StridedMatrix<T>& a, const StridedMatrix<T>& b,
                    T* c, int64_t ldc, const DepthOrder& order) {
  std::vector<T> sums(static_cast<size_t>(cols));
  for_each_depth_block(depth, order, [&](int64_t k0, int64_t kd) {
    check_cancelled();
    for (int64_t i = 0; i < rows; ++i) {
      std::fill(sums.begin(), sums.end(), T(0));
      for (int64_t k = k0; k < k0 + kd; ++k) {
        const T x = a.data[i * a.row_stride + k * a.col_stride];
        const T* bk = b.data + k * b.row_stride;
        for (int64_t j = 0; j < cols; ++j) {
          const T product = x * bk[j * b.col_stride];
          sums[j] += product;
        }
      }
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < cols; ++j) ci[j] = k0 == 0 ? sums[j] : ci[j] + sums[j];
    }
  });
}

template <class T>
void one_chain_blocks(int64_t rows, int64_t cols, int64_t depth, const StridedMatrix<T>& a,
                      const StridedMatrix<T>& b, T* c, int64_t ldc, const DepthOrder& order) {
  if (order.fused) fused_blocks(rows, cols, depth, a, b, c, ldc, order);
  else unfused_blocks(rows, cols, depth, a, b, c, ldc, order);
}

// Even and odd terms summed in two chains per depth block, added at the
// block's end; an odd last term is added alone after the blocks.
template <class T>
void two_chain_blocks(int64_t rows, int64_t cols, int64_t depth, const StridedMatrix<T>& a,
                      const StridedMatrix<T>& b, T* c, int64_t ldc, const DepthOrder& order) {
  const int64_t paired = depth - depth % 2;
  std::vector<T> even(static_cast<size_t>(rows * cols)), odd(even.size());
  DepthOrder one_chain = order;
  one_chain.chains = 1;
  one_chain.chunk = 0;
  for_each_depth_block(paired, order, [&](int64_t k0, int64_t kd) {
    auto every_other = [&](int64_t start, T* out) {
      const StridedMatrix<T> a_terms{a.data + start * a.col_stride, a.row_stride, 2 * a.col_stride};
      const StridedMatrix<T> b_terms{b.data + start * b.row_stride, 2 * b.row_stride, b.col_stride};
      one_chain.block = kd / 2;
      one_chain_blocks(rows, cols, kd / 2, a_terms, b_terms, out, cols, one_chain);
    };
    every_other(k0, even.data());
    every_other(k0 + 1, odd.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const T block_sum = even[i * cols + j] + odd[i * cols + j];
        c[i * ldc + j] = k0 == 0 ? block_sum : c[i * ldc + j] + block_sum;
      }
  });
  if (paired == depth) return;
  const int64_t last = depth - 1;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const T product = a.data[i * a.row_stride + last * a.col_stride] * b.data[last * b.row_stride + j * b.col_stride];
      const T term = product + T(0);  // the chain from +0, as its other lane
      c[i * ldc + j] = paired == 0 ? term : c[i * ldc + j] + term;
    }
}

template <class T>
void gemm_impl(int64_t rows, int64_t cols, int64_t depth, const StridedMatrix<T>& a, const StridedMatrix<T>& b,
               T* c, int64_t ldc, const DepthOrder& order) {
  if (rows == 0 || cols == 0) return;
  if (depth == 0) {
    for (int64_t i = 0; i < rows; ++i) std::fill(c + i * ldc, c + i * ldc + cols, T(0));  // an empty sum
    return;
  }
  if (depth == 1) {
    outer_product(rows, cols, a, b, c, ldc);
    return;
  }
  if (cols == 1) {
    matrix_times_column(rows, depth, a, b, c, ldc);
    return;
  }
  if (order.chains == 2) two_chain_blocks(rows, cols, depth, a, b, c, ldc, order);
  else one_chain_blocks(rows, cols, depth, a, b, c, ldc, order);
}

}  // namespace

void parallel_as_caller(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  const unsigned float_mode = CallersFloatMode::current();
  CancelToken* token = current_cancel_token();
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain), [&](const tbb::blocked_range<int64_t>& r) {
    const CallersFloatMode as_caller(float_mode);
    const CancelScope scope(token);
    body(r.begin(), r.end());
  });
}

void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<float> a, StridedMatrix<float> b,
                  float* c, int64_t ldc, const DepthOrder& order) {
  gemm_impl(rows, cols, depth, a, b, c, ldc, order);
}

void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<double> a, StridedMatrix<double> b,
                  double* c, int64_t ldc, const DepthOrder& order) {
  gemm_impl(rows, cols, depth, a, b, c, ldc, order);
}

}  // namespace meshsim
