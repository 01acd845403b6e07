// Exceptions that surface in Python as the matching built-in exception types.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace meshsim {

struct ValueError : std::runtime_error { using std::runtime_error::runtime_error; };
struct TypeError : std::runtime_error { using std::runtime_error::runtime_error; };
struct IndexError : std::runtime_error { using std::runtime_error::runtime_error; };
struct NotImplementedError : std::runtime_error { using std::runtime_error::runtime_error; };
struct NameError : std::runtime_error { using std::runtime_error::runtime_error; };  // unbound axis names
// Sharding in types: operands whose shardings a rule cannot combine (Python's
// meshsim.sharding.ShardingTypeError, a ValueError).
struct ShardingTypeError : ValueError { using ValueError::ValueError; };
// jax.dtypes.TypePromotionError, a ValueError: dtypes with no implicit promotion.
struct TypePromotionError : ValueError { using ValueError::ValueError; };

// Builds a message from streamable parts: fail<ValueError>("axis ", a, " out of range").
template <class E, class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw E(os.str());
}

}  // namespace meshsim
