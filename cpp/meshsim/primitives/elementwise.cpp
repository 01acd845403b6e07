// The elementwise family: lax semantics, operands of equal shapes and dtypes
// (the Python lax layer broadcasts size-1 dimensions first, as a zero-copy
// view), except that either operand of a binary operation may be a scalar, as
// may select_n's predicate and clamp's bounds. Its primitives live in one unit
// per op family; their scalar math in kernels/scalar_math.h.
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/primitives/families.h"

namespace meshsim {

void register_elementwise_primitives() {
  elementwise::register_unary_elementwise_primitives();
  elementwise::register_integer_elementwise_primitives();
  elementwise::register_binary_elementwise_primitives();
  elementwise::register_select_convert_primitives();
  elementwise::register_complex_elementwise_primitives();
  elementwise::register_special_elementwise_primitives();
}

}  // namespace meshsim
