// Halo exchanges: how XLA's partitioner gives each device the elements of a
// split dimension that an operation reading a window of its operand (a pad,
// later a slice or convolution) needs from its neighbours' blocks. Each
// device's result block i along the dim reads the operand range
// [i * window - low, (i + 1) * window - low); what lies outside its own block
// arrives in collective-permutes.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace meshsim {

// One collective-permute of a halo exchange: its size along the dim, and the
// blocks along the dim (their index, 0 = first) that send or receive in it.
struct HaloPermute {
  int64_t size = 0;
  std::vector<int64_t> blocks;
};

// Along a dim of `length` elements split into `shards` blocks of `block`,
// read as windows of `window` elements shifted by `low` (a pad's low padding;
// negative crops): the collective-permutes XLA's partitioner issues. Halos
// within a block of the neighbours go one permute per neighbour distance and
// side; halos more than twice a window wide go compactly, each block sending
// in turn the parts other blocks read. nullopt where XLA gathers the dim
// instead (halos beyond the neighbours, or compact ones as wide as the dim).
std::optional<std::vector<HaloPermute>> halo_permutes(int64_t length, int64_t shards, int64_t block,
                                                      int64_t window, int64_t low);

// `permutes` as a flat list of ints (a LocalPlan's param `halo_permutes`,
// which runtime/sharded.cpp moves and records): per permute, its size, how
// many blocks take part, and their indices.
std::vector<int64_t> flattened(const std::vector<HaloPermute>& permutes);

}  // namespace meshsim
