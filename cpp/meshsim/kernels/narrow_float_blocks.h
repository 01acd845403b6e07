// Narrow floats (bfloat16, float16, float8) mapped in float32 blocks by one
// kernel for all nine formats: the format is a run-time choice of the block
// conversions (compiled once, narrow_float_blocks.cpp), not a template
// argument, so each vector op is compiled once for them instead of per format.
#pragma once
#include <algorithm>

#include "meshsim/kernels/elementwise.h"

namespace meshsim {

// `n` elements of the narrow float dtype `dt` at `from` widened to float32
// (exactly), and `n` float32 values rounded to `dt` (to nearest even): the
// conversions compute_type_t and the element type's constructor make.
void narrow_to_float32(DType dt, const void* from, float* to, int64_t n);
void float32_to_narrow(DType dt, const float* from, void* to, int64_t n);

// map_unary_simd for a narrow float tensor: blocks are widened, computed and
// rounded back, giving the bits map_unary_simd<T> gives for that format.
template <class VecOp, class ScalarOp>
Tensor map_unary_simd_narrow(const Tensor& x, VecOp vec_op, ScalarOp scalar_op, float vec_limit) {
  constexpr int64_t lanes = xsimd::batch<float>::size;
  const Tensor in = x.contiguous();
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  const char* a = static_cast<const char*>(in.raw());
  char* o = static_cast<char*>(out.raw());
  const int64_t n = in.size(), item = static_cast<int64_t>(itemsize(x.dtype()));
  constexpr int64_t kBlock = 64 * lanes;  // stays in L1 between the three passes
  alignas(64) float src[kBlock], dst[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i), padded = (m + lanes - 1) / lanes * lanes;
    narrow_to_float32(x.dtype(), a + i * item, src, m);
    std::fill(src + m, src + padded, 0.0f);
    for (int64_t k = 0; k < padded; k += lanes) unary_simd_batch(src + k, dst + k, vec_op, scalar_op, vec_limit);
    float32_to_narrow(x.dtype(), dst, o + i * item, m);
  }
  return out;
}

}  // namespace meshsim
