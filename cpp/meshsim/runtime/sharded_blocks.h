// Block geometry and the collectives shared by the units running sharded
// values (runtime/sharded.cpp, reshard.cpp, reshard_collectives.cpp); included
// by those only.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/runtime/sharded.h"

namespace meshsim::sharded {

// ---- block geometry ---------------------------------------------------------------------

struct Box {
  std::vector<int64_t> lo, hi;  // per dimension, [lo, hi)
  int64_t size() const {
    int64_t n = 1;
    for (size_t d = 0; d < lo.size(); ++d) n *= std::max<int64_t>(0, hi[d] - lo[d]);
    return n;
  }
};

inline Box block_box(const Sharding& s, int64_t pos, const Shape& local) {
  const int64_t ndim = static_cast<int64_t>(local.size());
  std::vector<int64_t> bi = s.block_index(pos, ndim);
  Box b{std::vector<int64_t>(ndim), std::vector<int64_t>(ndim)};
  for (int64_t d = 0; d < ndim; ++d) {
    b.lo[d] = bi[d] * local[d];
    b.hi[d] = b.lo[d] + local[d];
  }
  return b;
}

inline Box intersect(const Box& a, const Box& b) {
  Box r = a;
  for (size_t d = 0; d < a.lo.size(); ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::min(a.hi[d], b.hi[d]);
  }
  return r;
}

inline bool contains(const Box& outer, const Box& inner) {
  for (size_t d = 0; d < outer.lo.size(); ++d)
    if (inner.lo[d] < outer.lo[d] || inner.hi[d] > outer.hi[d]) return false;
  return true;
}

// The part of `t` (holding box `at`) covering `box`.
inline Tensor view_of(const Tensor& t, const Box& at, const Box& box) {
  const size_t ndim = box.lo.size();
  std::vector<int64_t> start(ndim), stop(ndim), step(ndim, 1);
  for (size_t d = 0; d < ndim; ++d) {
    start[d] = box.lo[d] - at.lo[d];
    stop[d] = box.hi[d] - at.lo[d];
  }
  return t.slice(start, stop, step);
}

inline Sharding sharding_of(const MeshPtr& mesh, const Spec& spec) {
  Sharding s;
  s.mesh = mesh;
  s.spec = spec;
  return s;
}

// The axes a spec uses, and where: axis -> (dimension, position in the tuple).
inline std::map<std::string, std::pair<size_t, size_t>> axis_places(const Spec& spec) {
  std::map<std::string, std::pair<size_t, size_t>> out;
  for (size_t d = 0; d < spec.size(); ++d)
    for (size_t i = 0; i < spec[d].size(); ++i) out[spec[d][i]] = {d, i};
  return out;
}

// Devices along each dimension's entry: how many blocks a spec cuts it into.
inline std::vector<int64_t> blocks_per_dim(const Mesh& mesh, const Spec& spec) {
  std::vector<int64_t> n;
  for (const AxisNames& entry : spec) {
    int64_t k = 1;
    for (const std::string& a : entry) k *= mesh.axis_size(a);
    n.push_back(k);
  }
  return n;
}

// reshard_collectives.cpp: which collectives XLA runs for a reshard.

// A collective-permute of `block_bytes` per device, as XLA's partitioner
// moves blocks or halos between devices: over the devices at mesh positions
// `among` (empty: every device), spanning the axes along which they differ.
void record_permute(const Mesh& mesh, std::vector<int64_t> sent, std::vector<int64_t> received,
                    int64_t start, int64_t block_bytes, std::vector<int64_t> among = {});

// Which collective a reshard from `from` to `to` is: all-gather when axes
// only leave the spec, all-to-all when some move to another place.
void record_reshard(const Mesh& mesh, const Spec& from, const Spec& to, std::vector<int64_t> sent,
                    std::vector<int64_t> received, int64_t started, int64_t src_block_bytes);

// A reshard moving one dim's axes to an unsplit dim that axes the value does
// not use split too (`P('X')` to `P(None, ('Y', 'X'))` on 4x2), every other
// dim kept: recorded as XLA's partitioner runs it (a local slice over the new
// axes, an all-to-all over the moving ones and a collective-permute when the
// target orders them otherwise; or, where the target leaves a mesh axis
// unused, an all-gather) and true; false, nothing recorded, for another
// reshard. `all_to_all_only`: the all-to-all also where the target leaves
// axes unused, and false where the axes would be gathered.
bool record_retile_onto_new_axes(const Mesh& mesh, const Spec& from, const Spec& to, int64_t started,
                                 int64_t src_block_bytes, bool all_to_all_only);

// reshard.cpp: combining partial results.

// The partial results of each group of devices along `axes`, all-reduced by
// the kernel of the collective declared to combine partials by `op`
// (Primitive::partials_reduction: psum/pmax/pmin, as in a shard_map body) and recorded
// with its ring bytes.
void all_reduce(const Mesh& mesh, std::vector<Tensor>& per_device, const AxisNames& axes,
                const std::string& op);

AxisNames without(const AxisNames& a, const AxisNames& b);

}  // namespace meshsim::sharded
