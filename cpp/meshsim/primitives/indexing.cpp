// The indexing family: gathers and scatters (their shared form in
// indexing_common.h) and dynamic slices, one unit each, registered in this order.
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/indexing_common.h"

namespace meshsim {

void register_indexing_primitives() {
  indexing::register_gather();
  indexing::register_scatters();
  indexing::register_dynamic_slices();
}

}  // namespace meshsim
