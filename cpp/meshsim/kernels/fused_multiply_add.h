// a * b + c rounded once, element by element: what XLA's CPU code computes
// where LLVM contracts a product and the sum reading it into one
// instruction (runtime/xla_rewrites.h decides where).
#pragma once
#include "meshsim/core/tensor.h"

namespace meshsim {

// float32 or float64 operands of one dtype, each of `shape` or a scalar
// (rank 0) read at every element; the result is a fresh `shape` tensor.
Tensor fused_multiply_add(const Tensor& a, const Tensor& b, const Tensor& c, const Shape& shape);

// The kernel's float32 loop on `n` contiguous elements of each operand (the
// primitive's fusion tile, runtime/fusion.h).
void fused_multiply_add_row(const float* a, const float* b, const float* c, float* out, int64_t n);

}  // namespace meshsim
