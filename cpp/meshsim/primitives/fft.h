// The FFT (fft.cpp) belongs to the linear-algebra family:
// register_linalg_primitives registers it after the convolutions.
#pragma once

namespace meshsim {

void register_fft_primitive();  // fft

}  // namespace meshsim
