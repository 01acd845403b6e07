// The binary elementwise families other than arithmetic, each a unit of its own;
// register_binary_elementwise_primitives (elementwise_binary.cpp) registers them after
// the arithmetic ops, in that order.
#pragma once

namespace meshsim::elementwise {

void register_binary_math_primitives();  // max, min, atan2, nextafter, pow
void register_comparison_primitives();   // eq, ne, lt, le, gt, ge

}  // namespace meshsim::elementwise
