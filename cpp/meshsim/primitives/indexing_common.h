// Gathers and scatters: the one indexing form they share, its checks, the
// loop that walks it, and the rules both kinds build on (batching helpers,
// sharding plans and propagation factors). Each kind registers in its own
// unit (indexing_gather.cpp, indexing_scatter.cpp), dynamic slices in
// indexing_dynamic_slice.cpp; indexing.cpp registers them in order.
//
// JAX's gather/scatter carry XLA's general dimension numbers; ours keep the
// one form NumPy indexing needs, which `take`, `take_along_axis`, advanced
// indexing, `.at[]`, `bincount` and `segment_sum` all lower to:
//
//   gather(operand, *indices; axes, index_dims_at, mode, fill_value)
//   scatter[_add|_mul|_min|_max](operand, updates, *indices; axes, index_dims_at, mode)
//
// - `indices`: k >= 1 integer arrays of one shape B (the caller broadcasts);
//   indices[j] indexes operand axis axes[j].
// - The result (gather) / updates (scatter) have shape
//   rest[:index_dims_at] + B + rest[index_dims_at:], with `rest` the operand
//   dims not in `axes`, in order. So take(x, i, axis) is axes=(axis,),
//   index_dims_at=axis.
// - Negative indices count from the end (as NumPy's). Out-of-range indices:
//   mode "clip" clamps (JAX's getitem), "fill" yields fill_value (None: NaN,
//   the lowest signed / highest unsigned integer, True — as jnp.take),
//   "wrap" takes the index modulo the size, and for scatters "drop" skips
//   the update (JAX's default for .at[]).
// Duplicate indices accumulate in scatter_add/mul/min/max; for scatter the
// last update in row-major order wins.
// - Optional `batch_axes` (JAX's operand batching dims; index_dims_at 0):
//   operand dim d is indexed by the position along B's dim d, which has the
//   operand's size (its index array, an arange there, is not read). So
//   take_along_axis and `.at[:, idx]` keep a sharded batch dim shard-local.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/core/strided.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"

namespace meshsim::indexing {

// The families, registered by indexing.cpp in this order.
void register_gather();          // indexing_gather.cpp: gather
void register_scatters();        // indexing_scatter.cpp: scatter, scatter_add/mul/min/max
void register_dynamic_slices();  // indexing_dynamic_slice.cpp: dynamic_slice, dynamic_update_slice

enum class OutOfBounds { Clip, Fill, Wrap, Drop };

OutOfBounds parse_mode(const std::string& prim, const Params& params, bool is_scatter);

// The operand dims an index layout leaves alone, split around the batch dims.
struct Layout {
  IntList axes;
  int64_t index_dims_at = 0;
  Shape batch;
  IntList rest;        // operand dims not in axes, in order
  IntList batch_axes;  // axes indexed by their position along B's same dim
};

Layout layout_of(const Params& params, const Shape& batch, int64_t ndim);
Shape result_shape(const Layout& l, const Shape& operand);

// Checks the operand/indices part shared by gathers and scatters; returns the layout.
Layout check_indices(const std::string& prim, const Aval& operand, const Avals& indices,
                     const Params& params);

// Where the operand is one block of indexed dims split over Auto mesh axes
// (sharding propagation's partitioned gathers and scatters: param
// `index_blocks` lists, per device, its id and the first index of its block
// along each indexed axis; `index_sizes` the whole sizes): the current
// device's first indices, or empty for a whole operand.
std::vector<int64_t> block_starts(const Params& params, size_t num_axes);

// Batch positions whose index lies in another device's block (kMasked) or
// out of range (kOutOfRange: filled or dropped as the mode says).
constexpr int64_t kOutOfRange = -1, kMasked = -2;

// Operand offset of the element each batch position points at (axes part
// only), or kOutOfRange / kMasked (see above). Indices are taken whole (mode
// applied to the whole size) and then made local to the operand's block.
std::vector<int64_t> batch_offsets(const Tensor& operand, const Tensor* indices, const Layout& l,
                                   OutOfBounds mode, const Params& params);

// A view's dims picked out: (shape, strides) of dims `dims` of `t`.
std::pair<Shape, Strides> pick(const Tensor& t, const IntList& dims);
IntList range(int64_t lo, int64_t hi);
bool is_dense(const Shape& shape, const Strides& strides);

// The loop shared by gathers and scatters: for each element of the result
// (gather) or updates (scatter) — `other`, laid out as outer + B + inner —
// calls f(operand offset, other offset), or missing(other offset, why) when
// its index was out of range or in another device's block. Rows that are dense on both sides go to
// block(operand offset, other offset, length) instead (memcpy for a gather).
template <class F, class Block, class G>
void walk(const Tensor& operand, const Layout& l, const std::vector<int64_t>& boff,
          const Tensor& other, F&& f, Block&& block, G&& missing) {
  const IntList outer_dims(l.rest.begin(), l.rest.begin() + l.index_dims_at);
  const IntList inner_dims(l.rest.begin() + l.index_dims_at, l.rest.end());
  const int64_t nb_dims = static_cast<int64_t>(l.batch.size());
  const int64_t p = l.index_dims_at;
  auto [outer, op_outer] = pick(operand, outer_dims);
  auto [inner, op_inner] = pick(operand, inner_dims);
  auto [o1, ot_outer] = pick(other, range(0, p));
  auto [bshape, ot_batch] = pick(other, range(p, p + nb_dims));
  auto [i1, ot_inner] = pick(other, range(p + nb_dims, other.ndim()));
  std::vector<int64_t> ot_boff;
  for_each_offset(bshape, ot_batch, [&](int64_t o) { ot_boff.push_back(o); });
  const int64_t inner_size = num_elements(inner);
  const bool dense = is_dense(inner, op_inner) && is_dense(inner, ot_inner);
  for_each_offsets<2>(outer, {&op_outer, &ot_outer}, [&](const std::array<int64_t, 2>& o) {
    for (size_t b = 0; b < boff.size(); ++b) {
      const int64_t ob = o[1] + ot_boff[b];
      if (boff[b] < 0) {
        for_each_offset(inner, ot_inner, [&](int64_t i) { missing(ob + i, boff[b]); });
      } else if (dense) {
        block(o[0] + boff[b], ob, inner_size);
      } else {
        const int64_t ab = o[0] + boff[b];
        for_each_offsets<2>(inner, {&op_inner, &ot_inner},
                            [&](const std::array<int64_t, 2>& i) { f(ab + i[0], ob + i[1]); });
      }
    }
  });
}

// ---- VJP rules -------------------------------------------------------------
// A gather and a scatter_add with the same indices are each other's transpose.

struct IndexArgs {
  Values indices;
  IntList axes;
  int64_t index_dims_at;
  IntList batch_axes;
};

IndexArgs index_args(const VjpArgs& a, size_t first);
// `v` replicated: what a rule takes when a result laid out by `out_sharding` leaves the
// layouts of its operands or cotangent unrelated.
Value whole(const Value& v);

// ---- batching ---------------------------------------------------------------
// Batched indices move to the front of the index shape. A batched operand
// moves to the front too: with unbatched indices it is one more untouched
// dimension; with batched ones it is indexed by an iota over the batch, so
// example b reads (or writes) only its own slab.

bool any_batched(const BatchDims& dims, size_t first);

// With `batch_axes` (operand dim d indexed by its position along index dim
// d), the batch joins them: operand and indices batched at 0. True if set.
bool set_batch_axes(Params& params);
// The index arrays (from `first`) batched at 0, with the batch's iota in front.
Values batched_indices(const BatchArgs& a, size_t first);

// ---- sharding in types: what gathers and scatters share (sharding/rules.h) --

// The spec of the index arrays' common shape B (JAX concatenates them into one
// indices array): per dim the one non-None entry; nullopt on a conflict.
std::optional<Spec> index_batch_spec(const Avals& indices);
// The index arrays as JAX's one indices array: B + (k,), replicated on k.
Aval jax_indices_aval(const Avals& indices, const Spec& bspec);

// Gathers and scatters whose rule passed index whole (replicated) operand
// dims with indices replicated but on batch dims: each device works on its
// blocks, batch dims sharded alike on the operand, indices and
// result/updates (the kernel reads a batch dim's index from its position).
std::optional<LocalPlan> index_plan(const Avals& in, const Params& p, const Avals& out, bool scatter);

// Sharding propagation over Auto axes (Shardy's gather/scatter rules for
// our form): an operand dim that is not indexed passes to the result (and,
// for a scatter, from the updates' window dim); the index arrays' dims give
// the gather result's batch dims; a batching dim (take_along_axis, `.at[:, i]`)
// links the operand's, the indices' and the result's (and updates') dim.
// A scatter's index dims are computed whole; indexed dims are split as
// index_plan runs them.
std::optional<FactorMap> index_factors(const Avals& in, const Params& p, const Avals& out, bool scatter);

}  // namespace meshsim::indexing
