// Shapes, strides and the axis arithmetic every shape rule shares.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace meshsim {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, may be 0 (broadcast) or negative

int64_t num_elements(const Shape& shape);
Strides contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 3)"

// Resolves a possibly negative axis against `ndim`, or raises naming `what`.
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what = "axis");

// NumPy broadcasting of two shapes; raises ValueError naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace meshsim
