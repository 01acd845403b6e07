// Convolutions (convolution.cpp) belong to the linear-algebra family:
// register_linalg_primitives registers them after dot_general.
#pragma once

namespace meshsim {

void register_convolution_primitives();  // conv_general_dilated

}  // namespace meshsim
