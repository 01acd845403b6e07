// Matrix products whose every element is computed the same way wherever it
// sits: C[i, j] sums k in blocks of 256 from k = 0, each block one chain of
// fused multiply-adds in k's order from +0 (as XLA's CPU dot computes all
// but its smallest products, which decides the sign of a zero sum), the
// blocks' sums added in order. Neither the number of rows or columns, nor
// an element's place in a register tile, nor how the work is split among
// threads changes a bit of it: a product of a block of rows (one device's
// shard) equals those rows of the whole product, as a sharded JAX
// program's does. (OpenBLAS's kernels sum in an order that depends on the
// element's position in its register tile, on the row count and on the
// thread split.)
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

// c (rows x cols, row-major, rows `ldc` apart) = a (rows x depth) @ b (depth x cols).
// Runs on the calling thread and, for large products, TBB's workers with the
// caller's floating-point mode (core/denormals.h).
void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<float> a, StridedMatrix<float> b,
                  float* c, int64_t ldc);
void ordered_gemm(int64_t rows, int64_t cols, int64_t depth, StridedMatrix<double> a, StridedMatrix<double> b,
                  double* c, int64_t ldc);

// body(begin, end) over chunks of [0, n) (at least `grain` long) on TBB's
// threads, each with the caller's floating-point mode (core/denormals.h) and
// cancellation token (core/cancel.h), so every chunk computes and stops as
// the caller would.
void parallel_as_caller(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace meshsim
