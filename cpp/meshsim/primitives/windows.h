// Windowed reductions (windows.cpp) belong to the reduction family:
// register_reduction_primitives registers them after the cumulative ops.
#pragma once

namespace meshsim {

// reduce_window_sum/max/min, select_and_scatter_add, select_and_gather_add
void register_window_primitives();

}  // namespace meshsim
