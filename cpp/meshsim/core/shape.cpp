#include "meshsim/core/shape.h"

#include <algorithm>
#include <sstream>

#include "meshsim/core/error.h"

namespace meshsim {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
  if (overflow && std::find(shape.begin(), shape.end(), 0) == shape.end())
    fail<ValueError>("shape ", shape_str(shape), " has more elements than an array can hold (2**63 - 1)");
  return overflow ? 0 : n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what) {
  if (axis < -ndim || axis >= ndim)
    fail<ValueError>(what, " ", axis, " is out of bounds for array of dimension ", ndim);
  return axis < 0 ? axis + ndim : axis;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail<ValueError>("Incompatible shapes for broadcasting: shapes=[", shape_str(a), ", ",
                       shape_str(b), "]");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace meshsim
