// Window geometry shared by convolutions and windowed reductions: along one
// dimension, which input element each (window offset, output position) reads
// once the input is dilated (`base_dilation`, XLA's lhs dilation) and padded,
// and the window's elements spread by `window_dilation` (rhs dilation).
#pragma once
#include <cstdint>
#include <vector>

namespace meshsim {

struct WindowDim {
  int64_t in, window, out;  // input size, window size, output size
  int64_t stride, pad_lo, base_dilation, window_dilation;
};

// reads[k * out + o]: the input index that window offset k of output o
// reads, or -1 where padding or base dilation leave no element.
inline std::vector<int64_t> window_reads(const WindowDim& d) {
  std::vector<int64_t> reads(d.window * d.out, -1);
  for (int64_t k = 0; k < d.window; ++k)
    for (int64_t o = 0; o < d.out; ++o) {
      const int64_t p = o * d.stride + k * d.window_dilation - d.pad_lo;
      if (p < 0 || p % d.base_dilation) continue;
      const int64_t q = p / d.base_dilation;
      if (q < d.in) reads[k * d.out + o] = q;
    }
  return reads;
}

// Output size along a dimension: XLA's (padded dilated input - dilated window) / stride + 1, or 0.
inline int64_t window_output_size(int64_t in, int64_t window, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                                  int64_t base_dilation, int64_t window_dilation) {
  const int64_t dilated_in = in == 0 ? 0 : 1 + base_dilation * (in - 1);
  const int64_t dilated_window = window == 0 ? 0 : 1 + window_dilation * (window - 1);
  const int64_t padded = dilated_in + pad_lo + pad_hi;
  return padded < dilated_window ? 0 : (padded - dilated_window) / stride + 1;
}

}  // namespace meshsim
