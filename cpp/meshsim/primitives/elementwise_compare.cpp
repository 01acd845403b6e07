// Comparisons (eq, ne, lt, le, gt, ge), with XLA's semantics on CPU; complex
// operands only for eq and ne.
#include "meshsim/primitives/elementwise_binary.h"
#include "meshsim/primitives/elementwise_family.h"

namespace meshsim {

void elementwise::register_comparison_primitives() {
  using namespace elementwise;
  comparison<true>("eq", [](auto x, auto y) { return x == y; });
  comparison<true>("ne", [](auto x, auto y) { return x != y; });
  comparison<false>("lt", [](auto x, auto y) { return x < y; });
  comparison<false>("le", [](auto x, auto y) { return x <= y; });
  comparison<false>("gt", [](auto x, auto y) { return x > y; });
  comparison<false>("ge", [](auto x, auto y) { return x >= y; });
}

}  // namespace meshsim
