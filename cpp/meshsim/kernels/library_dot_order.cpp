// The dot library's choices, as measured against XLA on x86-64 with AVX2 and
// FMA (bit for bit, over random shapes): the kernels it has there, its cost
// model for picking one, when it repacks b, how it tiles the result's
// columns, and how a column panel's width bounds the depth block (a panel of
// b's depth block is sized to the 128 KiB the library assumes of the L2
// cache).
#include "meshsim/kernels/library_dot_order.h"

#include <algorithm>
#include <atomic>
#include <limits>

namespace meshsim {
namespace {

// A register kernel: it computes block_m x block_n results over block_k
// terms at a time, reading tile_n x tile_k values of b per load; tile_k
// terms are summed in as many separate chains, added at the end.
struct Kernel {
  int block_m, block_n, block_k, tile_n, tile_k;
  bool fused;        // fused multiply-adds, else products rounded before adding
  bool unaligned_b;  // reads b in place, without repacking it
};

// In the library's order, which decides ties. The kernel for a single
// column is left out: XLA never hands the library a matrix-vector product.
constexpr Kernel kKernels[] = {
    // FMA, one chain per element.
    {1, 32, 1, 8, 1, true, true}, {2, 32, 1, 8, 1, true, true}, {1, 16, 1, 8, 1, true, true},
    {2, 16, 1, 8, 1, true, true}, {3, 16, 1, 8, 1, true, true}, {4, 16, 1, 8, 1, true, true},
    {5, 16, 1, 8, 1, true, true}, {6, 16, 1, 8, 1, true, true}, {8, 8, 1, 8, 1, true, true},
    // FMA, even and odd terms in two chains.
    {1, 16, 2, 4, 2, true, false}, {2, 16, 2, 4, 2, true, false}, {1, 8, 2, 4, 2, true, false},
    {3, 8, 2, 4, 2, true, false}, {4, 8, 2, 4, 2, true, false}, {5, 8, 2, 4, 2, true, false},
    {6, 8, 2, 4, 2, true, false}, {4, 4, 2, 4, 2, true, false}, {5, 4, 2, 4, 2, true, false},
    {6, 4, 2, 4, 2, true, false}, {8, 4, 2, 4, 2, true, false},
    // AVX without FMA: multiply, then add.
    {1, 32, 1, 8, 1, false, true}, {2, 32, 1, 8, 1, false, true}, {1, 16, 1, 8, 1, false, true},
    {2, 16, 1, 8, 1, false, true}, {3, 16, 1, 8, 1, false, true}, {4, 16, 1, 8, 1, false, true},
    {4, 8, 1, 8, 1, false, true}, {6, 8, 1, 8, 1, false, true}, {8, 8, 1, 8, 1, false, true},
    // AVX2 without FMA, two chains.
    {1, 16, 2, 4, 2, false, false}, {2, 16, 2, 4, 2, false, false}, {1, 8, 2, 4, 2, false, false},
    {3, 8, 2, 4, 2, false, false}, {4, 8, 2, 4, 2, false, false}, {5, 8, 2, 4, 2, false, false},
    {6, 8, 2, 4, 2, false, false}, {4, 4, 2, 4, 2, false, false}, {5, 4, 2, 4, 2, false, false},
    {6, 4, 2, 4, 2, false, false}, {8, 4, 2, 4, 2, false, false},
    // SSE2.
    {1, 16, 1, 4, 1, false, false}, {2, 16, 1, 4, 1, false, false}, {3, 16, 1, 4, 1, false, false},
    {1, 8, 1, 4, 1, false, false}, {2, 8, 1, 4, 1, false, false}, {3, 8, 1, 4, 1, false, false},
    {4, 8, 1, 4, 1, false, false}, {4, 4, 1, 4, 1, false, false}, {6, 4, 1, 4, 1, false, false},
    {8, 4, 1, 4, 1, false, false},
};

std::atomic<bool> follow_library{false};

constexpr int64_t kCacheBytes = 128 * 1024;
// A depth this long or longer is split into chunks of half of it, each
// summed as a product of its own and added in order.
constexpr int64_t kChunkedDepth = 32 * 1024 / static_cast<int64_t>(sizeof(float));

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The library's cost estimate, in its float arithmetic: loads of b cost about
// twice those of a, and a larger register tile a little more.
float cost(const Kernel& kernel, int64_t m, int64_t n, int64_t k) {
  const float blocks_m = static_cast<float>(ceil_div(m, kernel.block_m));
  const float blocks_n = static_cast<float>(ceil_div(n, kernel.block_n));
  const float blocks_k = static_cast<float>(ceil_div(k, kernel.block_k));
  const int64_t loads_a = kernel.block_m * kernel.block_k / kernel.tile_k;
  const int64_t loads_b = kernel.block_n * kernel.block_k / (kernel.tile_n * kernel.tile_k);
  const float block_cost = static_cast<float>(loads_a * 5 + loads_b * 11 + 9) +
                           static_cast<float>(kernel.tile_n * kernel.tile_k) * 1e-4f;
  return blocks_m * blocks_n * blocks_k * block_cost;
}

template <class Accept>
const Kernel& cheapest(int64_t m, int64_t n, int64_t k, Accept accept) {
  const Kernel* best = nullptr;
  float best_cost = std::numeric_limits<float>::infinity();
  for (const Kernel& kernel : kKernels) {
    if (!accept(kernel)) continue;
    const float c = cost(kernel, m, n, k);
    if (c < best_cost) {
      best = &kernel;
      best_cost = c;
    }
  }
  return *best;
}

// The width of the column tiles the library's scheduler gives each task when
// b is read in place: tiles grow (columns while they are less than a quarter
// as many as the rows) from about 16 x 16 until they are worth a task, and no
// more than a cache-sized amount of work.
int64_t tile_width(int64_t m, int64_t n, int64_t k, int64_t block_n) {
  k = std::min<int64_t>(k, 1024);
  const int64_t min_area = std::max<int64_t>(std::min<int64_t>(m, 64) * std::min<int64_t>(n, 64), 256);
  const int64_t max_area = 256 * 256, max_cost = 1024 * 64, aspect = 4;
  int64_t cols = std::min(n, block_n), rows = std::min<int64_t>(m, 16);
  while (true) {
    if (cols * rows >= min_area && ((rows + cols) * k >= max_cost || rows * cols >= max_area)) break;
    if ((aspect * cols <= rows || rows >= m) && cols < n) cols *= 2;
    else if ((rows <= aspect * cols || cols >= n) && rows < m) rows *= 2;
    else break;
  }
  return std::min<int64_t>(cols, 65536);
}

DepthOrder order_for(const Kernel& kernel, int64_t panel_width, int64_t k) {
  const int64_t block = kCacheBytes / (panel_width * static_cast<int64_t>(sizeof(float)) * kernel.block_k) *
                        kernel.block_k;
  return DepthOrder{std::min(block, k), k >= kChunkedDepth ? kChunkedDepth / 2 : 0, kernel.tile_k,
                    kernel.fused};
}

}  // namespace

void set_library_dot_order_enabled(bool enabled) { follow_library.store(enabled, std::memory_order_relaxed); }

bool library_dot_order_enabled() { return follow_library.load(std::memory_order_relaxed); }

std::optional<std::vector<ColumnsOrder>> library_dot_order(const LibraryDotShape& shape) {
  const int64_t m = shape.m, k = shape.k, n = shape.n;
  if (m <= 1 || n <= 1 || std::max({m, k, n}) < 8) return std::nullopt;
  const Kernel& chosen = cheapest(m, n, k, [](const Kernel&) { return true; });
  const Kernel& in_place =
      chosen.tile_k == 1 ? chosen : cheapest(m, n, k, [](const Kernel& c) { return c.tile_k == 1 && c.unaligned_b; });
  // Repacking b costs a read of it, worth it when many row blocks read it.
  const bool repack = shape.b_transposed || ceil_div(m, in_place.block_m) > 10;
  std::vector<ColumnsOrder> groups;
  if (repack) {
    groups.push_back({0, n, order_for(chosen, chosen.block_n, k)});
    return groups;
  }
  const int64_t width = tile_width(m, n, k, std::max(16, in_place.block_n));
  for (int64_t j0 = 0; j0 < n; j0 += width) {
    const int64_t j1 = std::min(n, j0 + width);
    const DepthOrder order = order_for(in_place, j1 - j0, k);
    if (!groups.empty() && groups.back().order == order) groups.back().end = j1;
    else groups.push_back({j0, j1, order});
  }
  return groups;
}

}  // namespace meshsim
