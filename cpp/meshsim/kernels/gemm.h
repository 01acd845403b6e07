// Matrix products whose every element is summed in an order the caller
// chooses (DepthOrder), as XLA's CPU dot sums it: by default C[i, j] sums k
// in blocks of 256 from k = 0, each block one chain of fused multiply-adds in
// k's order from +0 (which decides the sign of a zero sum), the blocks' sums
// added in order. Neither an element's place in a register tile nor how the
// work is split among threads changes a bit of it. (OpenBLAS's kernels sum in
// an order that depends on the element's position in its register tile, on
// the row count and on the thread split.) Products XLA hands to its dot
// library are summed in the library's order (kernels/library_dot_order.h).
#pragma once

#include <cstdint>
#include <functional>

namespace meshsim {

// A matrix read through strides: element (i, j) at data[i * row_stride + j * col_stride].
template <class T>
struct StridedMatrix {
  const T* data;
  int64_t row_stride, col_stride;
};

// How each element's depth terms are summed: in blocks of `block` terms from
// the start of each chunk of `chunk` terms (0: one chunk), each block from +0
// in `chains` interleaved chains (1, or 2: even and odd terms apart, added at
// the block's end; an odd last term is added alone after the blocks), with
// fused multiply-adds or with products rounded before adding. The blocks'
// sums are added in order.
struct DepthOrder {
  int64_t block = 256, chunk = 0;
  int chains = 1;
  bool fused = true;
  bool operator==(const DepthOrder& o) const {
    return block == o.block && chunk == o.chunk && chains == o.chains && fused == o.fused;
  }
};

// c (rows x cols, row-major, rows `ldc` apart) = a (rows x depth) @ b (depth x cols).
// Runs on the calling thread and, for large products, TBB's workers with the
// caller's floating-point mode (core/denormals.h).
void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<float> a, StridedMatrix<float> b,
                  float* c, int64_t ldc, const DepthOrder& order = {});
void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<double> a, StridedMatrix<double> b,
                  double* c, int64_t ldc, const DepthOrder& order = {});

// body(begin, end) over chunks of [0, n) (at least `grain` long) on TBB's
// threads, each with the caller's floating-point mode (core/denormals.h) and
// cancellation token (core/cancel.h), so every chunk computes and stops as
// the caller would.
void parallel_as_caller(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace meshsim
