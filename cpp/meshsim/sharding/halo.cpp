#include "meshsim/sharding/halo.h"

#include <algorithm>
#include <set>

namespace meshsim {
namespace {

// a / b rounded up, for any sign of a (b > 0).
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

std::vector<int64_t> sorted(const std::set<int64_t>& s) { return {s.begin(), s.end()}; }

// How far block i's window reaches past the block on its left and right
// (negative: it starts or ends inside the block).
struct Reach {
  int64_t shards, block, window, low;
  int64_t left(int64_t i) const { return low + i * (block - window); }
  int64_t right(int64_t i) const { return (i + 1) * (window - block) - low; }
  template <class F>
  int64_t most(F reach, int64_t first, int64_t last) const {
    int64_t m = reach(first);
    for (int64_t i = first + 1; i < last; ++i) m = std::max(m, reach(i));
    return m;
  }
  int64_t most_left(int64_t first, int64_t last) const {
    return most([&](int64_t i) { return left(i); }, first, last);
  }
  int64_t most_right(int64_t first, int64_t last) const {
    return most([&](int64_t i) { return right(i); }, first, last);
  }
};

// One permute per neighbour distance and side: from the neighbour k + 1
// blocks to the left, the end of its block (less what lies beyond any
// window); from the one k + 1 blocks to the right, the start of its block.
std::optional<std::vector<HaloPermute>> neighbour_permutes(const Reach& r) {
  const int64_t n = r.shards, b = r.block;
  const int64_t max_left = r.most_left(1, n), max_right = r.most_right(0, n - 1);
  if (max_left + max_right + b >= b * n && (max_left > b || max_right > b))
    return std::nullopt;  // halos beyond the neighbours
  // The part of a block's coordinates that some window reads: [first, limit).
  const int64_t first = -r.most_left(0, n), limit = b + r.most_right(0, n);
  if (first >= limit) return std::nullopt;
  // Blocks k + 1 apart: the senders and receivers of a permute over that distance.
  auto apart = [n](int64_t k) {
    std::set<int64_t> blocks;
    for (int64_t i = k + 1; i < n; ++i) blocks.insert({i, i - k - 1});
    return sorted(blocks);
  };
  std::vector<HaloPermute> permutes;
  for (int64_t k = ceil_div(max_left, b) - 1; k >= 0 && (-k - 1) * b < limit; --k)
    permutes.push_back({std::min(max_left - b * k, b) - std::max<int64_t>(-k * b - limit, 0), apart(k)});
  const int64_t unread = std::min(std::max<int64_t>(first - b, 0), std::max<int64_t>(max_right, 0)) / b;
  for (int64_t k = unread; k < ceil_div(max_right, b); ++k)
    permutes.push_back({std::min(max_right - b * k, b) - std::max<int64_t>(first - (k + 1) * b, 0), apart(k)});
  return permutes;
}

// The compact exchange: each block's window cut into pieces, each piece
// padding, its own elements or one other block's; the pieces other blocks
// send are grouped into permutes, each block sending at most one piece and
// receiving at most one per permute.
std::vector<HaloPermute> compact_permutes(const Reach& r, int64_t length) {
  const int64_t n = r.shards, b = r.block;
  struct Piece {
    int64_t dest, start, limit, offset, from;  // start/limit within a block; from: -1 for padding
  };
  std::vector<std::vector<Piece>> pieces(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t start = i * b - r.left(i), limit = (i + 1) * b + r.right(i);
    for (int64_t next = start; next < limit;) {
      Piece p{i, ((next % b) + b) % b, 0, next - start, -1};
      int64_t size = limit - next;
      if (next < 0 || next >= length) {
        if (next < 0) size = std::min(size, -next);
      } else {
        size = std::min(b - p.start, size);
        p.from = next / b;
      }
      p.limit = p.start + size;
      pieces[i].push_back(p);
      next += size;
    }
  }
  // Padding pieces longer than a block are cut to blocks, unless every
  // block's piece at that place is padding; the pieces other blocks send are
  // listed per sender.
  std::vector<std::vector<Piece>> cut(n);
  std::vector<std::vector<Piece>> sends(n);
  std::vector<size_t> at(n, 0);
  while (true) {
    bool all_padding = true, done = true;
    for (int64_t i = 0; i < n; ++i)
      if (at[i] < pieces[i].size()) {
        done = false;
        all_padding = all_padding && pieces[i][at[i]].from < 0;
      }
    if (done) break;
    for (int64_t i = 0; i < n; ++i) {
      if (at[i] >= pieces[i].size()) continue;
      Piece& p = pieces[i][at[i]];
      cut[i].push_back(p);
      if (!all_padding && p.from < 0 && p.limit > b) {
        cut[i].back().limit = b;
        p.start = 0;
        p.limit -= b;
      } else {
        ++at[i];
      }
      if (p.from >= 0 && p.from != i) sends[p.from].push_back(cut[i].back());
    }
  }
  for (auto& s : sends)
    std::stable_sort(s.begin(), s.end(), [](const Piece& a, const Piece& c) { return a.offset < c.offset; });
  std::vector<HaloPermute> permutes;
  std::vector<size_t> sent(n, 0);
  while (true) {
    std::vector<bool> receives(n, false);
    std::set<int64_t> blocks;
    int64_t start = b, limit = 0;
    for (int64_t from = 0; from < n; ++from) {
      if (sent[from] >= sends[from].size()) continue;
      const Piece& p = sends[from][sent[from]];
      // Not two pieces to one block, nor a small left halo with a small right one.
      if (!blocks.empty() && (receives[p.dest] || (start > p.limit && limit == b && p.start == 0) ||
                              (limit < p.start && start == 0 && p.limit == b)))
        continue;
      receives[p.dest] = true;
      blocks.insert({from, p.dest});
      start = std::min(start, p.start);
      limit = std::max(limit, p.limit);
      ++sent[from];
    }
    if (blocks.empty()) break;
    permutes.push_back({limit - start, sorted(blocks)});
  }
  return permutes;
}

}  // namespace

std::optional<std::vector<HaloPermute>> halo_permutes(int64_t length, int64_t shards, int64_t block,
                                                      int64_t window, int64_t low) {
  if (shards < 2 || block < 1 || window < 1) return std::nullopt;
  const Reach r{shards, block, window, low};
  // Halos more than twice a window wide: compactly, unless a window is half the dim.
  if (std::max(r.most_left(0, shards), r.most_right(0, shards)) > 2 * window) {
    if (2 * window >= shards * block) return std::nullopt;
    return compact_permutes(r, length);
  }
  return neighbour_permutes(r);
}

std::vector<int64_t> flattened(const std::vector<HaloPermute>& permutes) {
  std::vector<int64_t> list;
  for (const HaloPermute& h : permutes) {
    list.insert(list.end(), {h.size, static_cast<int64_t>(h.blocks.size())});
    list.insert(list.end(), h.blocks.begin(), h.blocks.end());
  }
  return list;
}

}  // namespace meshsim
