// Integer and bitwise elementwise primitives: not, and/or/xor, shifts,
// population count and leading zeros, with XLA's semantics for out-of-range shifts.
#include <type_traits>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_family.h"

namespace meshsim {
using namespace elementwise;

void elementwise::register_integer_elementwise_primitives() {
  unary<Accepts::Bitwise>("not", [](auto x) {
    if constexpr (std::is_same_v<decltype(x), bool>) return !x;
    else return ~x;
  });
  unary<Accepts::Integer>("population_count", [](auto x) { return population_count_op(x); });
  unary<Accepts::Integer>("clz", [](auto x) { return clz_op(x); });
  binary<Accepts::Bitwise>("and", [](auto x, auto y) { return x & y; });
  binary<Accepts::Bitwise>("or", [](auto x, auto y) { return x | y; });
  binary<Accepts::Bitwise>("xor", [](auto x, auto y) { return x ^ y; });
  binary<Accepts::Integer>("shift_left", [](auto x, auto y) { return shift_left_op(x, y); });
  binary<Accepts::Integer>("shift_right_logical", [](auto x, auto y) { return shift_right_logical_op(x, y); });
  binary<Accepts::Integer>("shift_right_arithmetic",
         [](auto x, auto y) { return shift_right_arithmetic_op(x, y); });
}

}  // namespace meshsim
