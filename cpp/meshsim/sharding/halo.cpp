#include "meshsim/sharding/halo.h"

#include <algorithm>

namespace meshsim {
namespace {

// a / b rounded up, for any sign of a (b > 0).
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

}  // namespace

std::optional<std::vector<int64_t>> halo_permute_sizes(int64_t shards, int64_t block, int64_t window,
                                                       int64_t low) {
  if (shards < 2 || block < 1 || window < 1) return std::nullopt;
  // How far block i's window reaches past the block on its left and right
  // (negative: it starts or ends inside the block).
  auto left = [&](int64_t i) { return low + i * (block - window); };
  auto right = [&](int64_t i) { return (i + 1) * (window - block) - low; };
  auto most = [](auto reach, int64_t first, int64_t last) {
    int64_t m = reach(first);
    for (int64_t i = first + 1; i < last; ++i) m = std::max(m, reach(i));
    return m;
  };
  // Halos more than twice a window wide go compactly or by gathering.
  if (std::max(most(left, 0, shards), most(right, 0, shards)) > 2 * window) return std::nullopt;
  const int64_t max_left = most(left, 1, shards), max_right = most(right, 0, shards - 1);
  if (max_left + max_right + block >= block * shards && (max_left > block || max_right > block))
    return std::nullopt;  // halos beyond the neighbours
  // The part of a block's coordinates that some window reads: [first, limit).
  const int64_t first = -most(left, 0, shards), limit = block + most(right, 0, shards);
  if (first >= limit) return std::nullopt;
  std::vector<int64_t> sizes;
  // From the neighbour k + 1 blocks to the left: the end of its block, less
  // what lies beyond any window.
  for (int64_t k = ceil_div(max_left, block) - 1; k >= 0 && (-k - 1) * block < limit; --k)
    sizes.push_back(std::min(max_left - block * k, block) - std::max<int64_t>(-k * block - limit, 0));
  // From the neighbour k + 1 blocks to the right: the start of its block.
  const int64_t unread = std::min(std::max<int64_t>(first - block, 0), std::max<int64_t>(max_right, 0)) / block;
  for (int64_t k = unread; k < ceil_div(max_right, block); ++k)
    sizes.push_back(std::min(max_right - block * k, block) - std::max<int64_t>(first - (k + 1) * block, 0));
  return sizes;
}

}  // namespace meshsim
