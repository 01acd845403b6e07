// Pieces shared by the LAPACK-backed primitives (decompositions.cpp, eig.cpp, schur.cpp):
// stacks of matrices in the last two dimensions, and the column-major scratch
// copies LAPACK works on.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// The last two dimensions of `shape` and how many matrices precede them.
struct Stack {
  int64_t count, rows, cols;
};
inline Stack stack_of(const Shape& shape) {
  const int64_t n = static_cast<int64_t>(shape.size());
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < n; ++d) count *= shape[d];
  return {count, shape[n - 2], shape[n - 1]};
}

inline Shape with_last(const Shape& shape, std::initializer_list<int64_t> last, size_t drop = 2) {
  Shape out(shape.begin(), shape.end() - drop);
  out.insert(out.end(), last);
  return out;
}

// Row-major rows x cols at `src` into column-major at `dst` (leading dim `ld`), and back.
template <class T>
void to_colmajor(const T* src, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i + j * ld] = src[i * cols + j];
}
template <class T>
void from_colmajor(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * ld];
}

inline int lapack_int(int64_t n, const char* prim) {
  if (n > std::numeric_limits<int>::max())
    fail<ValueError>(prim, ": matrix dimension ", n, " is too large for LAPACK");
  return static_cast<int>(n);
}

// LAPACK's workspace query: the optimal size it reports in work[0].
template <class T>
int workspace(T reported) {
  return std::max(1, static_cast<int>(reported));
}

// Registered by register_decomposition_primitives (families.h).
void register_eig_primitive();
void register_schur_primitives();  // schur.cpp: schur, hessenberg, householder_product

}  // namespace meshsim
