// The register tile of kernels/gemm.cpp, one source for every instruction
// set: gemm_tile_avx2.cpp compiles it for AVX2 with FMA, gemm.cpp for the
// build's baseline, and gemm.cpp picks one when the process starts.
#pragma once

#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace meshsim::gemm_tile {

// Packed operands: a panel of kTileRows rows of A stored column after column
// (for each k, the tile's rows), a panel of tile_cols columns of B stored row
// after row; panels past the matrix edge are zero-padded.
template <class T>
struct TileKernel {
  int tile_rows, tile_cols;
  // The sum over `depth` steps of acc = fma(a[k], b[k], acc) from +0, stored
  // into c (tile_rows x tile_cols, row stride ldc) when `first`, else added to it.
  void (*run)(int64_t depth, const T* a_panel, const T* b_panel, T* c, int64_t ldc, bool first);
};

constexpr int kTileRows = 4;

template <class T, class Arch>
void run_tile(int64_t depth, const T* a_panel, const T* b_panel, T* c, int64_t ldc, bool first) {
  using Batch = xsimd::batch<T, Arch>;
  constexpr int64_t kLanes = Batch::size;
  Batch acc[kTileRows][2];
#pragma GCC unroll 6
  for (int r = 0; r < kTileRows; ++r) acc[r][0] = acc[r][1] = Batch(T(0));
  for (int64_t k = 0; k < depth; ++k) {
    const Batch b0 = Batch::load_unaligned(b_panel), b1 = Batch::load_unaligned(b_panel + kLanes);
#pragma GCC unroll 6
    for (int r = 0; r < kTileRows; ++r) {
      const Batch a(a_panel[r]);
      acc[r][0] = xsimd::fma(a, b0, acc[r][0]);
      acc[r][1] = xsimd::fma(a, b1, acc[r][1]);
    }
    a_panel += kTileRows;
    b_panel += 2 * kLanes;
  }
#pragma GCC unroll 6
  for (int r = 0; r < kTileRows; ++r) {
    if (!first) {
      acc[r][0] = Batch::load_unaligned(c + r * ldc) + acc[r][0];
      acc[r][1] = Batch::load_unaligned(c + r * ldc + kLanes) + acc[r][1];
    }
    acc[r][0].store_unaligned(c + r * ldc);
    acc[r][1].store_unaligned(c + r * ldc + kLanes);
  }
}

template <class T, class Arch>
TileKernel<T> tile_kernel() {
  return {kTileRows, static_cast<int>(2 * xsimd::batch<T, Arch>::size), &run_tile<T, Arch>};
}

// Defined in gemm_tile_avx2.cpp, compiled for AVX2 and FMA (call only where
// the processor has them).
TileKernel<float> avx2_tile_f32();
TileKernel<double> avx2_tile_f64();

}  // namespace meshsim::gemm_tile
