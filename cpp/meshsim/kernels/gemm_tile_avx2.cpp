// The register tile compiled for AVX2 with FMA (this unit only; see
// CMakeLists.txt): gemm.cpp calls it when the processor has both. Elsewhere
// (other processors) the unit gives the baseline tile.
#include "meshsim/kernels/gemm_tile.h"

namespace meshsim::gemm_tile {

#if defined(__AVX2__) && defined(__FMA__)
using Avx2 = xsimd::fma3<xsimd::avx2>;
#else
using Avx2 = xsimd::default_arch;
#endif

TileKernel<float> avx2_tile_f32() { return tile_kernel<float, Avx2>(); }
TileKernel<double> avx2_tile_f64() { return tile_kernel<double, Avx2>(); }

}  // namespace meshsim::gemm_tile
