// Integer and bitwise elementwise primitives: not, and/or/xor, shifts,
// population count and leading zeros, with XLA's semantics for out-of-range shifts.
#include <type_traits>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_family.h"

namespace meshsim {
using namespace elementwise;

// Four-bit integers shift and count leading zeros within their four bits, as
// XLA's CPU code does (so a uint4's top bit is its sign for an arithmetic
// shift). Shift amounts are read unsigned; 4 or more shifts everything out.
namespace {
constexpr int kNibble = 4;
int nibble_clz(int u, bool) {
  int n = 0;
  for (int bit = kNibble - 1; bit >= 0 && !(u & (1 << bit)); --bit) ++n;
  return n;
}
int nibble_shift_left(int u, int v, bool) { return v >= kNibble ? 0 : (u << v) & 0xf; }
int nibble_shift_right_logical(int u, int v, bool) { return v >= kNibble ? 0 : u >> v; }
int nibble_shift_right_arithmetic(int u, int v, bool) {
  const int s = u & 0x8 ? u - 16 : u;
  return (v >= kNibble ? (s < 0 ? -1 : 0) : s >> v) & 0xf;
}
}  // namespace

void elementwise::register_integer_elementwise_primitives() {
  unary<Accepts::Bitwise>("not", [](auto x) {
    if constexpr (std::is_same_v<decltype(x), bool>) return !x;
    else return ~x;
  });
  unary<Accepts::Integer>("population_count", [](auto x) { return population_count_op(x); });
  unary<Accepts::Integer>("clz", [](auto x) { return clz_op(x); }, nullptr, nibble_clz);
  register_primitive(commuting(binary_primitive<Accepts::Bitwise>("and", [](auto x, auto y) { return x & y; })));
  register_primitive(commuting(binary_primitive<Accepts::Bitwise>("or", [](auto x, auto y) { return x | y; })));
  register_primitive(commuting(binary_primitive<Accepts::Bitwise>("xor", [](auto x, auto y) { return x ^ y; })));
  binary<Accepts::Integer>("shift_left", [](auto x, auto y) { return shift_left_op(x, y); }, nullptr, nullptr,
                           nibble_shift_left);
  binary<Accepts::Integer>("shift_right_logical", [](auto x, auto y) { return shift_right_logical_op(x, y); },
                           nullptr, nullptr, nibble_shift_right_logical);
  binary<Accepts::Integer>("shift_right_arithmetic", [](auto x, auto y) { return shift_right_arithmetic_op(x, y); },
                           nullptr, nullptr, nibble_shift_right_arithmetic);
}

}  // namespace meshsim
