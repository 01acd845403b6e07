// The convolution kernel on channels-last buffers: the input as [examples,
// spatial..., features], the filters as [window..., in features, out
// features] and the result as [examples, spatial..., out features], so that a
// window element's features are one contiguous run in both operands and the
// filters of a window offset are already a [in, out] matrix.
#pragma once
#include <cstdint>
#include <vector>

#include "meshsim/core/dtype.h"
#include "meshsim/kernels/windows.h"

namespace meshsim {

struct ConvGeometry {
  std::vector<WindowDim> spatial;  // per spatial dimension
  int64_t examples = 1;            // result examples (per batch group)
  int64_t lhs_features = 1;        // the input's features, every group's
  int64_t in_features = 1;         // per group: the filters' input features
  int64_t out_features = 1;        // the filters' output features, every group's
  int64_t groups = 1;
  bool batch_grouped = false;  // groups take consecutive input examples (batch_group_count), not features
};

// out[n, p..., g*Og + o] = sum over the window's offsets k and the group's
// input features i of x[example, s(p, k)..., feature] * w[k..., i, g*Og + o],
// where s(p, k) is the input element window offset k of output position p
// reads (none where padding or input dilation leave a hole). `dtype` is
// float32, float64, complex64, complex128 or an integer type (which
// accumulates in itself, wrapping).
void conv_channels_last(DType dtype, const void* x, const void* w, void* out, const ConvGeometry& geometry);

}  // namespace meshsim
