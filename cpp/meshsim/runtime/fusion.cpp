#include "meshsim/runtime/fusion.h"

#include <algorithm>
#include <map>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "meshsim/core/cancel.h"
#include "meshsim/core/denormals.h"
#include "meshsim/runtime/timeline.h"

namespace meshsim {

namespace {

// The equation's fusion loop, or nullptr when its primitive declares none.
const FusionTile* tile_of(const Equation& e) { return e.prim->float_tile.loop ? &e.prim->float_tile : nullptr; }

// Whether `in` has `out`'s rank and each of its dims is `out`'s or a size-1 dim
// the op broadcasts (`add f32[8,8] f32[1,8]`).
bool broadcasts_to(const Shape& in, const Shape& out) {
  if (in.size() != out.size()) return false;
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] != out[d] && in[d] != 1) return false;
  return true;
}

// The shape of an equation that can join a run: one float32 result, every
// operand float32 of that shape, a scalar beside it, or of its rank with
// size-1 dims it broadcasts (read as tiles of copies: the kernels' loops
// compute each element alike whatever the operand's stride, except a div's,
// which is dense-only); nullptr otherwise.
const Shape* fusable_shape(const Program& program, const Equation& e, const FusionTile* t) {
  if (!t || e.prim->passes_through || e.outputs.size() != 1 ||
      e.inputs.size() != static_cast<size_t>(t->arity))
    return nullptr;
  const Aval& out = program.avals[e.outputs[0]];
  if (out.dtype != DType::Float32) return nullptr;
  for (int v : e.inputs) {
    const Aval& in = program.avals[v];
    const bool broadcast = !t->dense_only && ((in.shape.empty() && !out.shape.empty()) ||
                                              broadcasts_to(in.shape, out.shape));
    if (in.dtype != DType::Float32 || (in.shape != out.shape && !broadcast)) return nullptr;
  }
  return &out.shape;
}

}  // namespace

bool fusion_enabled() { return !timeline::active(); }

// How far past a run's first equation its other equations are looked for.
constexpr size_t kFusionWindow = 256;

// Tiles start at multiples of kFusionTile elements of a value; each
// equation's tile is computed by its primitive's `float_tile` loop
// (ir/primitive.h), declared where the primitive is registered. Every step
// loads and stores its tile: 256 elements keep a chain's tiles in L1
// (bench_kernels' 7-op chain took ~12% less CPU time than with 512; 128 and
// 1024 were slower).
constexpr int64_t kFusionTile = 256;

// Tiles a task computes when a run is split over threads: enough work
// (8K elements through the whole chain) to outweigh handing it over.
constexpr int64_t kTilesPerTask = 8192 / kFusionTile;
// A run of at least this many tiles is split into tasks. A single equation
// of that size is a run too, so that it is split the same way.
constexpr int64_t kSplitFromTiles = 2 * kTilesPerTask;
// How many tiles ahead of the one computing a thread requests its memory.
constexpr int64_t kPrefetchTiles = 2;

FusionPlan::FusionPlan(const Program& program, const std::vector<int>& last) {
  const size_t n = program.eqns.size();
  role_.assign(n, -1);
  std::vector<const Shape*> shape(n);
  for (size_t k = 0; k < n; ++k)
    shape[k] = fusable_shape(program, program.eqns[k], tile_of(program.eqns[k]));
  // A run gathers the equations of its first one's shape that follow it, up
  // to an equation that is not its own but reads one of its values (which
  // would then not be computed yet), or one that may run mesh-wide (runs
  // live inside one run of local equations of the mesh executor).
  std::vector<char> in_run(program.avals.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    if (!shape[k] || role_[k] >= 0) continue;
    std::vector<size_t> members{k};
    in_run[program.eqns[k].outputs[0]] = 1;
    for (size_t j = k + 1; j < n && j < k + kFusionWindow; ++j) {
      const Equation& e = program.eqns[j];
      if (e.prim->is_collective() || (e.prim->mesh_call && calls_collective(e))) break;
      if (role_[j] < 0 && shape[j] && *shape[j] == *shape[k]) {
        members.push_back(j);
        in_run[e.outputs[0]] = 1;
        continue;
      }
      bool reads_run = false;
      for (int v : e.inputs) reads_run = reads_run || in_run[v];
      if (reads_run) break;
    }
    for (size_t j : members) in_run[program.eqns[j].outputs[0]] = 0;
    // Every operand must still be there where the run executes: not read
    // last (and so freed or moved away) by an equation between its members.
    auto operands_live = [&] {
      for (size_t j : members)
        for (int v : program.eqns[j].inputs)
          if (last[v] < static_cast<int>(members.back()) &&
              std::find(members.begin(), members.end(), static_cast<size_t>(last[v])) == members.end())
            return false;
      return true;
    };
    while (members.size() >= 2 && !operands_live()) members.pop_back();
    const bool split_alone = num_elements(*shape[k]) >= kSplitFromTiles * kFusionTile;
    if (members.size() < 2 && !split_alone) continue;

    FusedGroup g;
    g.members = members;
    g.shape = *shape[k];
    g.size = num_elements(g.shape);
    std::map<int, int> id;  // variable -> value id: the run's inputs first, then its results
    for (size_t j : members) {
      const Equation& e = program.eqns[j];
      for (int v : e.inputs)
        if (!id.count(v)) {
          id[v] = -1 - static_cast<int>(g.inputs.size());  // an input; renumbered below
          g.inputs.push_back(v);
          g.scalar_input.push_back(program.avals[v].shape.empty() && !g.shape.empty());
        }
      id[e.outputs[0]] = static_cast<int>(g.results.size());
      g.results.push_back(e.outputs[0]);
    }
    for (size_t s = 0; s < members.size(); ++s) {
      const Equation& e = program.eqns[members[s]];
      FusedGroup::Step step{tile_of(e), {0, 0, 0}};
      for (int i = 0; i < step.tile->arity; ++i) {
        const int v = id.at(e.inputs[i]);
        step.operand[i] = v < 0 ? -1 - v : static_cast<int>(g.inputs.size()) + v;
      }
      g.steps.push_back(step);
      g.kept.push_back(last[e.outputs[0]] > static_cast<int>(members.back()));
    }
    const int index = static_cast<int>(groups_.size());
    for (size_t j : members) role_[j] = index;
    groups_.push_back(std::move(g));
  }
}

namespace {

// A strided float32 view read tile by tile in row-major order: the tile's
// elements are gathered into a buffer the run reads, so a broadcast or
// transposed operand is never packed whole (a buffer and a pass over it per
// run). Size-1 dims are dropped and dims laid out one after the other merged,
// so a broadcast row reads as whole rows (copied) or repeats (filled).
class TileGather {
 public:
  static constexpr int kMaxDims = 8;

  // False for views of more dims than it handles (after merging).
  bool reset(const Tensor& t) {
    data_ = t.data<float>();
    nd_ = 0;
    for (int64_t d = 0; d < t.ndim(); ++d) {
      const int64_t size = t.shape()[d], stride = t.strides()[d];
      if (size == 1) continue;
      if (nd_ > 0 && stride_[nd_ - 1] == stride * size) {
        shape_[nd_ - 1] *= size;
        stride_[nd_ - 1] = stride;
        continue;
      }
      if (nd_ == kMaxDims) return false;
      shape_[nd_] = size;
      stride_[nd_] = stride;
      ++nd_;
    }
    if (nd_ == 0) {  // one element
      shape_[0] = 1;
      stride_[0] = 0;
      nd_ = 1;
    }
    return true;
  }

  // Elements [start, start + n) in row-major order into `out`.
  void read(int64_t start, int64_t n, float* out) const {
    int64_t index[kMaxDims];
    int64_t offset = 0;
    for (int d = nd_ - 1; d >= 0; --d) {
      index[d] = start % shape_[d];
      start /= shape_[d];
      offset += index[d] * stride_[d];
    }
    const int inner = nd_ - 1;
    const int64_t step = stride_[inner];
    while (n > 0) {
      const int64_t count = std::min(n, shape_[inner] - index[inner]);
      const float* from = data_ + offset;
      if (step == 1) std::copy(from, from + count, out);
      else if (step == 0) std::fill(out, out + count, *from);
      else
        for (int64_t i = 0; i < count; ++i) out[i] = from[i * step];
      out += count;
      n -= count;
      offset += count * step;
      index[inner] += count;
      // Carry into the outer dims.
      for (int d = inner; d > 0 && index[d] == shape_[d]; --d) {
        offset -= shape_[d] * stride_[d];
        index[d] = 0;
        ++index[d - 1];
        offset += stride_[d - 1];
      }
    }
  }

 private:
  const float* data_ = nullptr;
  int nd_ = 0;
  int64_t shape_[kMaxDims], stride_[kMaxDims];
};

}  // namespace

bool run_fused_group(const FusedGroup& g, const Tensor* const* inputs, Tensor* results) {
  const size_t num_in = g.inputs.size(), num_steps = g.steps.size();
  // Operands from outside read in place, or gathered tile by tile when they
  // are views (unless a step reads their layout). What every thread
  // computing tiles reads is held here, not in thread-locals (another
  // thread would see its own).
  std::vector<TileGather> gathers;
  std::vector<int> gathered(num_in, -1);  // per input: its gather, -1 when read in place
  std::vector<const float*> base(num_in + num_steps, nullptr);  // where value ids start
  // Scalars beside the shape read as a tile of copies.
  size_t scalars = 0;
  for (size_t i = 0; i < num_in; ++i) scalars += g.scalar_input[i];
  std::vector<float> repeated(scalars * kFusionTile);
  // Operands with size-1 dims the run broadcasts, as views of the run's shape.
  std::vector<Tensor> expanded(num_in);
  for (size_t i = 0, r = 0; i < num_in; ++i) {
    if (!inputs[i]->defined()) return false;
    if (!g.scalar_input[i] && inputs[i]->shape() != g.shape) expanded[i] = inputs[i]->broadcast_to(g.shape);
    const Tensor& t = expanded[i].defined() ? expanded[i] : *inputs[i];
    if (g.scalar_input[i]) {
      float* tile = repeated.data() + (r++) * kFusionTile;
      std::fill(tile, tile + kFusionTile, *t.data<float>());
      base[i] = tile;
    } else if (!t.is_contiguous()) {
      for (const FusedGroup::Step& s : g.steps)
        for (int o = 0; o < s.tile->arity; ++o)
          if (s.tile->dense_only && s.operand[o] == static_cast<int>(i)) return false;
      gathers.emplace_back();
      if (!gathers.back().reset(t)) return false;
      gathered[i] = static_cast<int>(gathers.size() - 1);
    } else {
      base[i] = t.data<float>();
    }
  }
  check_cancelled();
  // Kept results get their buffers; the others live in scratch tiles, a
  // tile taken again once the last step reading its value is done, so that
  // a long run's working set stays small (one tile per temporary made ten
  // additions to constants 40 KiB of tiles, more than a 32 KiB L1). A step
  // never writes a tile it reads.
  std::vector<int> last_read(num_steps, -1);  // per step: the last step reading its result
  for (size_t s = 0; s < num_steps; ++s)
    for (int o = 0; o < g.steps[s].tile->arity; ++o)
      if (g.steps[s].operand[o] >= static_cast<int>(num_in)) last_read[g.steps[s].operand[o] - num_in] = s;
  std::vector<int> scratch_slot(num_steps, -1);  // per temporary: its tile
  std::vector<int> free_slots;
  int temporaries = 0;
  for (size_t s = 0; s < num_steps; ++s) {
    if (g.kept[s]) {
      results[s] = Tensor::empty(DType::Float32, g.shape);
      base[num_in + s] = results[s].data<float>();
    } else if (free_slots.empty()) {
      scratch_slot[s] = temporaries++;
    } else {
      scratch_slot[s] = free_slots.back();
      free_slots.pop_back();
    }
    auto release = [&](size_t r) {
      if (scratch_slot[r] >= 0) free_slots.push_back(scratch_slot[r]);
      last_read[r] = -2;  // released (an operand may be read twice by one step)
    };
    for (int o = 0; o < g.steps[s].tile->arity; ++o) {
      const int r = g.steps[s].operand[o] - static_cast<int>(num_in);
      if (r >= 0 && last_read[r] == static_cast<int>(s)) release(r);
    }
    if (last_read[s] == -1) release(s);  // read by no step
  }

  // Tiles [first, last) on this thread: its own tiles for the temporaries
  // and the gathered operands.
  auto compute_tiles = [&](int64_t first, int64_t last) {
    // A thread computes one task's tiles at a time (a caller waits for its
    // tasks isolated), so its scratch is its own meanwhile.
    thread_local std::vector<float> scratch_tiles;
    thread_local std::vector<const float*> tile_of_value;
    scratch_tiles.resize((temporaries + gathers.size()) * kFusionTile);
    tile_of_value.resize(num_in + num_steps);
    // Plain pointers in the loop: each use of a thread-local would look it up again.
    float* const scratch = scratch_tiles.data();
    float* const gather_tiles = scratch + temporaries * kFusionTile;
    const float** const at = tile_of_value.data();  // per value id: the tile being computed
    const float* operands[3];
    // The dense operands read in place and the kept results of a tile ahead
    // are requested from memory while this tile computes: a run's steps
    // alternate between streaming (its first reads, its last writes) and
    // computing, which the hardware prefetcher alone does not overlap.
    auto prefetch_tile = [&](int64_t ahead) {
      const int64_t from = ahead * kFusionTile, count = std::min(kFusionTile, g.size - from);
      constexpr int64_t kLine = 64 / sizeof(float);
      for (size_t i = 0; i < num_in; ++i)
        if (gathered[i] < 0 && !g.scalar_input[i])
          for (int64_t e = 0; e < count; e += kLine) __builtin_prefetch(base[i] + from + e, 0);
      for (size_t s = 0; s < num_steps; ++s)
        if (g.kept[s])
          for (int64_t e = 0; e < count; e += kLine) __builtin_prefetch(base[num_in + s] + from + e, 1);
    };
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t start = tile * kFusionTile, n = std::min(kFusionTile, g.size - start);
      if (tile + kPrefetchTiles < last) prefetch_tile(tile + kPrefetchTiles);
      for (size_t i = 0; i < num_in; ++i) {
        if (gathered[i] >= 0) {
          float* to = gather_tiles + gathered[i] * kFusionTile;
          gathers[gathered[i]].read(start, n, to);
          at[i] = to;
        } else {
          at[i] = g.scalar_input[i] ? base[i] : base[i] + start;
        }
      }
      for (size_t s = 0; s < num_steps; ++s) {
        const FusedGroup::Step& step = g.steps[s];
        for (int o = 0; o < step.tile->arity; ++o) operands[o] = at[step.operand[o]];
        float* out = g.kept[s] ? const_cast<float*>(base[num_in + s]) + start
                               : scratch + scratch_slot[s] * kFusionTile;
        step.tile->loop(operands, out, n);
        at[num_in + s] = out;
      }
    }
  };
  const int64_t num_tiles = (g.size + kFusionTile - 1) / kFusionTile;
  if (num_tiles < kSplitFromTiles) {
    compute_tiles(0, num_tiles);
    return true;
  }
  const unsigned float_mode = CallersFloatMode::current();
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, num_tiles, kTilesPerTask),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        const CallersFloatMode as_caller(float_mode);
                        compute_tiles(r.begin(), r.end());
                      });
  });
  return true;
}

}  // namespace meshsim
