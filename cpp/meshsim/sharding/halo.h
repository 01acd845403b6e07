// Halo exchanges: how XLA's partitioner gives each device the elements of a
// split dimension that an operation reading a window of its operand (a pad,
// later a slice or convolution) needs from its neighbours' blocks. Each
// device's result block i along the dim reads the operand range
// [i * window - low, (i + 1) * window - low); what lies outside its own block
// arrives in collective-permutes, a device's neighbour at distance k sending
// the part of its block that device needs, one permute per distance and side.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace meshsim {

// Along a dim split into `shards` blocks of `block` elements, read as windows
// of `window` elements shifted by `low` (a pad's low padding; negative crops):
// the sizes along the dim of the collective-permutes XLA's partitioner issues
// (left halos first, farthest neighbour first, then right halos, nearest
// first). nullopt where XLA does not exchange halos but gathers the dim
// (halos beyond the neighbours, or halos so large that it exchanges them
// compactly, which is not modelled).
std::optional<std::vector<int64_t>> halo_permute_sizes(int64_t shards, int64_t block, int64_t window,
                                                       int64_t low);

}  // namespace meshsim
