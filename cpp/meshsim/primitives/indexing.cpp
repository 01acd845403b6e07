// Indexing primitives: gathers, scatters and dynamic slices.
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
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/scalar_math.h"
#include "meshsim/kernels/strided.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/timeline.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

enum class OutOfBounds { Clip, Fill, Wrap, Drop };

OutOfBounds parse_mode(const std::string& prim, const Params& params, bool is_scatter) {
  const std::string& mode = params.get<std::string>("mode");
  if (mode == "clip") return OutOfBounds::Clip;
  if (!is_scatter && mode == "fill") return OutOfBounds::Fill;
  if (!is_scatter && mode == "wrap") return OutOfBounds::Wrap;
  if (is_scatter && mode == "drop") return OutOfBounds::Drop;
  fail<ValueError>(prim, ": unsupported mode '", mode, "'; expected ",
                   is_scatter ? "'clip' or 'drop'" : "'clip', 'fill' or 'wrap'");
}

// The operand dims an index layout leaves alone, split around the batch dims.
struct Layout {
  IntList axes;
  int64_t index_dims_at = 0;
  Shape batch;
  IntList rest;        // operand dims not in axes, in order
  IntList batch_axes;  // axes indexed by their position along B's same dim
};

Layout layout_of(const Params& params, const Shape& batch, int64_t ndim) {
  Layout l{params.get<IntList>("axes"), params.get<int64_t>("index_dims_at"), batch, {},
           params.get_or<IntList>("batch_axes", IntList{})};
  std::vector<bool> indexed(ndim, false);
  for (int64_t a : l.axes) indexed[a] = true;
  for (int64_t d = 0; d < ndim; ++d)
    if (!indexed[d]) l.rest.push_back(d);
  return l;
}

Shape result_shape(const Layout& l, const Shape& operand) {
  Shape s;
  for (int64_t i = 0; i < l.index_dims_at; ++i) s.push_back(operand[l.rest[i]]);
  s.insert(s.end(), l.batch.begin(), l.batch.end());
  for (size_t i = l.index_dims_at; i < l.rest.size(); ++i) s.push_back(operand[l.rest[i]]);
  return s;
}

// Checks the operand/indices part shared by gathers and scatters; returns the layout.
Layout check_indices(const std::string& prim, const Aval& operand, const Avals& indices,
                     const Params& params) {
  const IntList& axes = params.get<IntList>("axes");
  if (indices.empty() || indices.size() != axes.size())
    fail<TypeError>(prim, " needs one index array per indexed axis; got ", indices.size(),
                    " index arrays for axes ", param_value_str(axes));
  std::set<int64_t> seen;
  for (int64_t a : axes)
    if (a < 0 || a >= operand.ndim() || !seen.insert(a).second)
      fail<ValueError>(prim, " axes must be distinct dimensions of the operand of shape ",
                       shape_str(operand.shape), "; got ", param_value_str(axes));
  for (const Aval& idx : indices) {
    if (!is_integer(idx.dtype))
      fail<TypeError>(prim, " indices must have an integer type, got ", dtype_name(idx.dtype));
    if (idx.shape != indices[0].shape)
      fail<TypeError>(prim, " index arrays must have one shape, got ", shape_str(indices[0].shape),
                      " and ", shape_str(idx.shape));
  }
  Layout l = layout_of(params, indices[0].shape, operand.ndim());
  if (l.index_dims_at < 0 || l.index_dims_at > static_cast<int64_t>(l.rest.size()))
    fail<ValueError>(prim, " index_dims_at must be in [0, ", l.rest.size(), "], got ", l.index_dims_at);
  for (int64_t d : l.batch_axes)
    if (l.index_dims_at != 0 || std::find(axes.begin(), axes.end(), d) == axes.end() ||
        d >= static_cast<int64_t>(l.batch.size()) || l.batch[d] != operand.shape[d])
      fail<ValueError>(prim, " batch_axes must be indexed axes d whose size the index dimension d has "
                       "(with index_dims_at=0); got ", param_value_str(l.batch_axes), " for operand of shape ",
                       shape_str(operand.shape), " and indices of shape ", shape_str(l.batch));
  return l;
}

// Where the operand is one block of indexed dims split over Auto mesh axes
// (sharding propagation's partitioned gathers and scatters: param
// `index_blocks` lists, per device, its id and the first index of its block
// along each indexed axis; `index_sizes` the whole sizes): the current
// device's first indices, or empty for a whole operand.
std::vector<int64_t> block_starts(const Params& params, size_t num_axes) {
  if (!params.has("index_blocks")) return {};
  const IntList& blocks = params.get<IntList>("index_blocks");
  const int64_t device = timeline::current_device();
  for (size_t k = 0; k + num_axes < blocks.size(); k += num_axes + 1)
    if (blocks[k] == device) return std::vector<int64_t>(blocks.begin() + k + 1, blocks.begin() + k + 1 + num_axes);
  fail<std::runtime_error>("a partitioned gather or scatter runs on device ", device, ", which holds no block");
}

// Batch positions whose index lies in another device's block (kMasked) or
// out of range (kOutOfRange: filled or dropped as the mode says).
constexpr int64_t kOutOfRange = -1, kMasked = -2;

// Operand offset of the element each batch position points at (axes part
// only), or kOutOfRange / kMasked (see above). Indices are taken whole (mode
// applied to the whole size) and then made local to the operand's block.
std::vector<int64_t> batch_offsets(const Tensor& operand, const Tensor* indices, const Layout& l,
                                   OutOfBounds mode, const Params& params) {
  std::vector<int64_t> off(num_elements(l.batch), 0);
  const std::vector<int64_t> starts = block_starts(params, l.axes.size());
  for (size_t j = 0; j < l.axes.size(); ++j) {
    const int64_t local = operand.shape()[l.axes[j]], stride = operand.strides()[l.axes[j]];
    const int64_t start = starts.empty() ? 0 : starts[j];
    const int64_t n = starts.empty() ? local : params.get<IntList>("index_sizes")[j];
    if (std::find(l.batch_axes.begin(), l.batch_axes.end(), l.axes[j]) != l.batch_axes.end()) {
      int64_t inner = 1;  // B's row-major stride of dim axes[j]
      for (size_t d = l.axes[j] + 1; d < l.batch.size(); ++d) inner *= l.batch[d];
      for (size_t b = 0; b < off.size(); ++b)
        if (off[b] >= 0) off[b] += (static_cast<int64_t>(b) / inner % n) * stride;
      continue;
    }
    const Tensor& idx = indices[j];
    dispatch_integer(idx.dtype(), [&](auto tag) {
      using I = decltype(tag);
      const I* p = idx.data<I>();
      int64_t b = 0;
      for_each_offset(idx.shape(), idx.strides(), [&](int64_t o) {
        int64_t i = static_cast<int64_t>(p[o]);
        if (mode == OutOfBounds::Wrap) {
          i = n ? (i % n + n) % n : -1;
        } else {
          if (i < 0) i += n;
          if (mode == OutOfBounds::Clip && n > 0) i = std::clamp<int64_t>(i, 0, n - 1);
        }
        if (off[b] == kOutOfRange || i < 0 || i >= n) off[b] = kOutOfRange;
        else if (off[b] == kMasked || i < start || i >= start + local) off[b] = kMasked;
        else off[b] += (i - start) * stride;
        ++b;
      });
    });
  }
  return off;
}

// A view's dims picked out: (shape, strides) of dims `dims` of `t`.
std::pair<Shape, Strides> pick(const Tensor& t, const IntList& dims) {
  Shape s;
  Strides st;
  for (int64_t d : dims) {
    s.push_back(t.shape()[d]);
    st.push_back(t.strides()[d]);
  }
  return {s, st};
}

IntList range(int64_t lo, int64_t hi) {
  IntList r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

bool is_dense(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

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

template <class T>
T default_fill() {
  if constexpr (std::is_same_v<T, bool>) return true;
  else if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
  else if constexpr (is_small_float_v<T>) return T(std::numeric_limits<float>::quiet_NaN());
  else if constexpr (is_complex_v<T>) {  // XLA fills with NaN + 0j
    return T(std::numeric_limits<typename T::value_type>::quiet_NaN(), 0);
  } else if constexpr (is_int4_v<T>) return T(T::kIsSigned ? T::kMin : T::kMax);
  else if constexpr (std::is_signed_v<T>) return std::numeric_limits<T>::lowest();
  else return std::numeric_limits<T>::max();
}

template <class T>
T fill_value(const Params& params) {
  if (params.is_none("fill_value")) return default_fill<T>();
  for (const auto& [name, v] : params.items())
    if (name == "fill_value")
      return std::visit([](const auto& s) -> T {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_arithmetic_v<S>) return static_cast<T>(s);
        else fail<TypeError>("gather fill_value must be a scalar");
      }, v);
  return default_fill<T>();
}

// ---- VJP rules -------------------------------------------------------------
// A gather and a scatter_add with the same indices are each other's transpose.

struct IndexArgs {
  Values indices;
  IntList axes;
  int64_t index_dims_at;
  IntList batch_axes;
};

IndexArgs index_args(const VjpArgs& a, size_t first) {
  return {Values(a.in.begin() + first, a.in.end()), a.params.get<IntList>("axes"),
          a.params.get<int64_t>("index_dims_at"), a.params.get_or<IntList>("batch_axes", IntList{})};
}

// "wrap" indices made explicit ((i mod n + n) mod n), for a scatter to read.
Values wrapped(const Values& indices, const IntList& axes, const Shape& shape) {
  Values out;
  for (size_t j = 0; j < indices.size(); ++j) {
    const Value n = ops::full_like(indices[j], static_cast<double>(shape[axes[j]]));
    out.push_back(ops::bind1("rem", {ops::add(ops::bind1("rem", {indices[j], n}), n), n}));
  }
  return out;
}

Cotangents gather_vjp(const VjpArgs& a) {
  IndexArgs ix = index_args(a, 1);
  std::string mode = a.params.get<std::string>("mode");
  if (mode == "wrap") {
    ix.indices = wrapped(ix.indices, ix.axes, aval_of(a.in[0]).shape);
    mode = "clip";
  }
  Value g = *a.ct[0];
  if (a.params.has("out_sharding") && !a.params.is_none("out_sharding")) {
    // The result (and so its cotangent) was laid out as asked, possibly sharded along index
    // dims; the scatter-add into the operand's layout takes them whole.
    auto whole = [](const Value& v) {
      Aval r = aval_of(v);
      r.spec.assign(r.shape.size(), AxisNames{});
      return ops::reshard_like(v, r);
    };
    g = whole(g);
    for (Value& i : ix.indices) i = whole(i);
  }
  Cotangents ct(a.in.size());
  ct[0] = ops::scatter("scatter_add", ops::zeros_like(a.in[0]), g, ix.indices, ix.axes,
                       ix.index_dims_at, mode == "fill" ? "drop" : "clip", ix.batch_axes);
  return ct;
}

// The gather reading back what a scatter with these params wrote (dropped: 0).
Value gather_back(const Value& x, const IndexArgs& ix, const std::string& scatter_mode) {
  if (scatter_mode == "drop")
    return ops::gather(x, ix.indices, ix.axes, ix.index_dims_at, "fill", 0.0, ix.batch_axes);
  return ops::gather(x, ix.indices, ix.axes, ix.index_dims_at, "clip", std::nullopt, ix.batch_axes);
}

Cotangents scatter_add_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = *a.ct[0];
  if (a.wants[1]) ct[1] = gather_back(*a.ct[0], ix, a.params.get<std::string>("mode"));
  return ct;
}

// scatter: an update reaches the result only where it was written last. Tag
// each update with its position + 1 and scatter the tags to find out.
Cotangents scatter_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  const std::string& mode = a.params.get<std::string>("mode");
  const Value& g = *a.ct[0];
  const Shape& upd_shape = aval_of(a.in[1]).shape;
  const int64_t n = num_elements(upd_shape);
  const Value tags = ops::reshape(ops::add(ops::iota(DType::Int32, {n}, 0), ops::full({n}, DType::Int32, 1.0)),
                                  upd_shape);
  const Value written = ops::scatter("scatter", ops::full(aval_of(a.in[0]).shape, DType::Int32, 0.0), tags,
                                     ix.indices, ix.axes, ix.index_dims_at, mode, ix.batch_axes);
  Cotangents ct(a.in.size());
  if (a.wants[0])
    ct[0] = ops::select(ops::eq(written, ops::full_like(written, 0.0)), g, ops::zeros_like(g));
  if (a.wants[1]) {
    const Value won = ops::eq(gather_back(written, ix, mode), tags);
    const Value picked = gather_back(g, ix, mode);
    ct[1] = ops::select(won, picked, ops::zeros_like(picked));
  }
  return ct;
}

// scatter_mul is linear in the operand; its updates' cotangent needs unique
// indices, which the primitive does not promise (JAX refuses it too).
Cotangents scatter_mul_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  if (a.wants[1])
    fail<NotImplementedError>("scatter_mul gradients are only implemented if `unique_indices=True`");
  Cotangents ct(a.in.size());
  ct[0] = ops::scatter("scatter_mul", *a.ct[0], a.in[1], ix.indices, ix.axes, ix.index_dims_at,
                       a.params.get<std::string>("mode"), ix.batch_axes);
  return ct;
}

// scatter_min/max: g goes to whichever of the operand and the updates ended
// up in the result, shared evenly between ties (as JAX).
Cotangents scatter_extremal_vjp(const VjpArgs& a) {
  const IndexArgs ix = index_args(a, 2);
  const std::string& mode = a.params.get<std::string>("mode");
  const Value &g = *a.ct[0], &x = a.in[0], &u = a.in[1], &out = a.out[0];
  const Aval xa = aval_of(x);
  const Value landed = gather_back(ops::full_like(x, 1.0), ix, mode);  // 0 where dropped
  const Value won_u = ops::mul(ops::convert(ops::eq(u, gather_back(out, ix, mode)), xa.dtype), landed);
  const Value kept_x = ops::convert(ops::eq(x, out), xa.dtype);
  const Value count = ops::add(ops::scatter("scatter_add", ops::zeros_like(x), won_u, ix.indices, ix.axes,
                                            ix.index_dims_at, mode, ix.batch_axes), kept_x);
  const Value share = ops::div(g, ops::max(count, ops::full_like(count, 1.0)));
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = ops::mul(share, kept_x);
  if (a.wants[1]) ct[1] = ops::mul(gather_back(share, ix, mode), won_u);
  return ct;
}

Cotangents dynamic_slice_vjp(const VjpArgs& a) {
  const Values starts(a.in.begin() + 1, a.in.end());
  Cotangents ct(a.in.size());
  ct[0] = ops::dynamic_update_slice(ops::zeros_like(a.in[0]), *a.ct[0], starts);
  return ct;
}

Cotangents dynamic_update_slice_vjp(const VjpArgs& a) {
  const Values starts(a.in.begin() + 2, a.in.end());
  const Value& g = *a.ct[0];
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = ops::dynamic_update_slice(g, ops::zeros_like(a.in[1]), starts);
  if (a.wants[1]) ct[1] = ops::dynamic_slice(g, starts, aval_of(a.in[1]).shape);
  return ct;
}

// ---- batching ---------------------------------------------------------------
// Batched indices move to the front of the index shape. A batched operand
// moves to the front too: with unbatched indices it is one more untouched
// dimension; with batched ones it is indexed by an iota over the batch, so
// example b reads (or writes) only its own slab.

bool any_batched(const BatchDims& dims, size_t first) {
  for (size_t i = first; i < dims.size(); ++i)
    if (dims[i] != kNotBatched) return true;
  return false;
}

// With `batch_axes` (operand dim d indexed by its position along index dim
// d), the batch joins them: operand and indices batched at 0. True if set.
bool set_batch_axes(Params& params) {
  const IntList batch_axes = params.get_or<IntList>("batch_axes", IntList{});
  if (batch_axes.empty()) return false;
  IntList shifted = shift_axes(batch_axes);
  shifted.insert(shifted.begin(), 0);
  params.set("batch_axes", shifted);
  return true;
}

// The index arrays (from `first`) batched at 0, with the batch's iota in front.
Values batched_indices(const BatchArgs& a, size_t first) {
  Values idx;
  for (size_t i = first; i < a.in.size(); ++i) idx.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
  idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
  return idx;
}

Batched gather_batch(const BatchArgs& a) {
  const IntList& axes = a.params.get<IntList>("axes");
  const int64_t at = a.params.get<int64_t>("index_dims_at");
  Params params = a.params;
  Values in;
  const bool by_position = set_batch_axes(params);
  if (!any_batched(a.dims, 1) && !by_position) {
    params.set("axes", shift_axes(axes));
    params.set("index_dims_at", at + 1);
    in.push_back(batch_at(a.in[0], a.dims[0], 0, a.size));
    in.insert(in.end(), a.in.begin() + 1, a.in.end());
    return {meshsim::bind(a.prim, in, params), {0}};
  }
  if (a.dims[0] == kNotBatched && !by_position) {
    in.push_back(a.in[0]);
    for (size_t i = 1; i < a.in.size(); ++i) in.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
  } else {
    IntList new_axes = shift_axes(axes);
    new_axes.insert(new_axes.begin(), 0);
    params.set("axes", new_axes);
    in.push_back(batch_at(a.in[0], a.dims[0], 0, a.size));
    for (const Value& v : batched_indices(a, 1)) in.push_back(v);
  }
  return {meshsim::bind(a.prim, in, params), {at}};
}

Batched scatter_batch(const BatchArgs& a) {
  const IntList& axes = a.params.get<IntList>("axes");
  const int64_t at = a.params.get<int64_t>("index_dims_at");
  Params params = a.params;
  Values in{batch_at(a.in[0], a.dims[0], 0, a.size)};
  const bool by_position = set_batch_axes(params);
  if (!any_batched(a.dims, 2) && !by_position) {
    params.set("axes", shift_axes(axes));
    params.set("index_dims_at", at + 1);
    in.push_back(batch_at(a.in[1], a.dims[1], 0, a.size));
    in.insert(in.end(), a.in.begin() + 2, a.in.end());
  } else {
    IntList new_axes = shift_axes(axes);
    new_axes.insert(new_axes.begin(), 0);
    params.set("axes", new_axes);
    in.push_back(batch_at(a.in[1], a.dims[1], at, a.size));  // the updates' index block starts at `at`
    for (const Value& v : batched_indices(a, 2)) in.push_back(v);
  }
  return {meshsim::bind(a.prim, in, params), {0}};
}

// Batched start indices: the window of each example as indices of every
// element, [batch, *window] per operand dimension, started where
// dynamic_slice starts it (negative from the end, clamped to fit).
Values window_indices(const BatchArgs& a, size_t first, const Shape& window) {
  const Shape& operand = aval_of(a.in[0]).shape;
  Shape shape{a.size};
  shape.insert(shape.end(), window.begin(), window.end());
  Values idx;
  for (size_t k = 0; k < window.size(); ++k) {
    const int64_t n = operand[k + (a.dims[0] != kNotBatched && static_cast<int64_t>(k) >= a.dims[0] ? 1 : 0)];
    const int64_t d = a.dims[first + k];
    Value s = ops::convert(a.in[first + k], DType::Int32);
    auto c = [&](double v) { return ops::full(aval_of(s).shape, DType::Int32, v); };
    s = ops::select(ops::lt(s, c(0)), ops::add(s, c(static_cast<double>(n))), s);
    s = ops::max(ops::min(s, c(static_cast<double>(n - window[k]))), c(0));
    s = ops::broadcast_in_dim(s, shape, d == kNotBatched ? IntList{} : IntList{0});
    idx.push_back(ops::add(s, ops::iota(DType::Int32, shape, static_cast<int64_t>(k) + 1)));
  }
  return idx;
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

// The spec of the index arrays' common shape B (JAX concatenates them into one
// indices array): per dim the one non-None entry; nullopt on a conflict.
std::optional<Spec> index_batch_spec(const Avals& indices) {
  const size_t nb = indices[0].shape.size();
  Spec b(nb);
  for (const Aval& ix : indices) {
    const Spec s = spec_of(ix);
    for (size_t d = 0; d < nb; ++d) {
      if (s[d].empty()) continue;
      if (!b[d].empty() && b[d] != s[d]) return std::nullopt;
      b[d] = s[d];
    }
  }
  return b;
}

// The index arrays as JAX's one indices array: B + (k,), replicated on k.
Aval jax_indices_aval(const Avals& indices, const Spec& bspec) {
  Aval a = indices[0];
  a.shape.push_back(static_cast<int64_t>(indices.size()));
  a.spec = bspec;
  a.spec.push_back({});
  a.vma.clear();
  return a;
}

// JAX's _gather_spec_computation for our form gather(operand, *indices; axes,
// index_dims_at): an indexed operand dim must be replicated (its slice is one
// element), the index arrays' dims give the result's batch dims (and must not
// be sharded: that needs collectives), the other operand dims keep their spec.
std::vector<Spec> gather_rule(const Avals& in, const Params& p, const Avals& out) {
  // `.at[idx].get(out_sharding=)`: the result is laid out as asked and the operand and
  // indices are brought to match it (index_plan).
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const Aval& x = in[0];
  const Avals indices(in.begin() + 1, in.end());
  const IntList& axes = p.get<IntList>("axes");
  const int64_t at = p.get<int64_t>("index_dims_at");
  const Spec xs = spec_of(x);
  // Batching dims (take_along_axis): operand dim d is indexed by an arange along B's dim d.
  const IntList batch = p.has("batch_axes") ? p.get<IntList>("batch_axes") : IntList{};
  auto bspec = index_batch_spec(indices);
  bool ok = bspec.has_value();
  for (int64_t a : axes)
    if (!in_list(batch, a)) ok &= xs[a].empty() || x.shape[a] == 1;
  for (size_t d = 0; ok && d < bspec->size(); ++d) {
    AxisNames& b = (*bspec)[d];
    if (in_list(batch, static_cast<int64_t>(d))) {
      if (!b.empty() && !xs[d].empty() && b != xs[d]) ok = false;
      else if (b.empty()) b = xs[d];
    } else {
      ok &= b.empty();
    }
  }
  if (!ok) {
    Spec shown = bspec ? *bspec : spec_of(indices[0]);
    Avals non_batch;
    for (size_t j = 0; j < axes.size(); ++j)
      if (!in_list(batch, axes[j])) non_batch.push_back(indices[j]);
    if (non_batch.empty()) non_batch.push_back(indices[0]);
    fail<ShardingTypeError>("Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for "
                            "the gather indexing as out sharding could not be resolved unambiguously "
                            "(or would require collectives on inputs). Got operand=", x.repr(),
                            ", indices=", jax_indices_aval(non_batch, shown).repr());
  }
  Spec rest;
  for (size_t d = 0; d < xs.size(); ++d)
    if (!in_list(axes, static_cast<int64_t>(d))) rest.push_back(xs[d]);
  Spec o(rest.begin(), rest.begin() + at);
  o.insert(o.end(), bspec->begin(), bspec->end());
  o.insert(o.end(), rest.begin() + at, rest.end());
  return {pad_spec(o, out[0].shape.size())};
}

// JAX's _scatter_spec_computation for scatter(operand, updates, *indices):
// indexed operand dims replicated, the updates' and indices' batch dims
// replicated, the updates' window dims as the operand's (jnp broadcasts the
// updates to the operand's slice sharding, so a replicated one conforms).
// A batch axis d (`.at[:, idx]`'s full slice: JAX's window dim) keeps its
// sharding, which the updates' and indices' dim d share.
std::vector<Spec> scatter_rule(const Avals& in, const Params& p, const Avals&) {
  const Aval &x = in[0], &u = in[1];
  const Avals indices(in.begin() + 2, in.end());
  const IntList& axes = p.get<IntList>("axes");
  const IntList batch = p.get_or<IntList>("batch_axes", IntList{});
  const int64_t at = p.get<int64_t>("index_dims_at");
  const Spec xs = spec_of(x), us = spec_of(u);
  const int64_t nb = static_cast<int64_t>(indices[0].shape.size());
  auto bspec = index_batch_spec(indices);
  bool ok = bspec.has_value();
  for (int64_t a : axes) ok &= in_list(batch, a) || xs[a].empty();
  Spec o = xs;
  auto conform = [&](const AxisNames& ue, AxisNames& od) {
    if (!ue.empty() && !od.empty() && ue != od) ok = false;
    if (od.empty()) od = ue;
  };
  int64_t ud = 0;
  for (size_t d = 0; d < xs.size() && ok; ++d) {
    if (in_list(axes, static_cast<int64_t>(d))) continue;
    if (ud == at) ud += nb;
    conform(us[ud++], o[d]);
  }
  for (int64_t b = 0; b < nb && ok; ++b) {
    if (in_list(batch, b)) {
      conform(us[at + b], o[b]);
      const AxisNames& ib = (*bspec)[b];
      ok &= ib.empty() || ib == o[b];
    } else {
      ok &= us[at + b].empty() && (*bspec)[b].empty();
    }
  }
  if (!ok) {
    Aval shown_u = u;  // as jnp broadcast it: its window dims laid out as the operand's
    shown_u.spec = us;
    shown_u.vma.clear();
    for (size_t d = 0, k = 0; d < xs.size(); ++d) {
      if (in_list(axes, static_cast<int64_t>(d))) continue;
      if (static_cast<int64_t>(k) == at) k += nb;
      if (shown_u.spec[k].empty()) shown_u.spec[k] = xs[d];
      ++k;
    }
    for (int64_t b : batch)
      if (shown_u.spec[at + b].empty()) shown_u.spec[at + b] = xs[b];
    // JAX's indices array leaves out the window (batch) dims and components.
    Spec shown = bspec ? *bspec : spec_of(indices[0]);
    Avals non_batch;
    for (size_t j = 0; j < axes.size(); ++j)
      if (!in_list(batch, axes[j])) non_batch.push_back(indices[j]);
    Aval shown_i = jax_indices_aval(non_batch.empty() ? indices : non_batch, shown);
    Shape ishape;
    Spec ispec;
    for (int64_t b = 0; b < static_cast<int64_t>(shown_i.shape.size()); ++b)
      if (b >= nb || !in_list(batch, b)) ishape.push_back(shown_i.shape[b]), ispec.push_back(shown_i.spec[b]);
    shown_i.shape = ishape;
    shown_i.spec = ispec;
    fail<ShardingTypeError>("Use `.at[...].set/add/mul/...(out_sharding=)` to provide output "
                            "PartitionSpec for the scatter update as out sharding could not be "
                            "resolved unambiguously (or would require collectives on inputs). Got "
                            "operand=", x.repr(), ", indices=", shown_i.repr(),
                            ", updates=", shown_u.repr());
  }
  return {o};
}

// Whether a gather or scatter can run on operand blocks split along indexed
// dims over Auto mesh axes, as XLA partitions them: each device looks up (or
// updates) the indices that fall in its block; a gather's results from the
// other blocks are zeros, summed over those axes. Scatters must drop
// out-of-range updates (a clipped index would land in every block); gathers
// of booleans are not summed.
bool splits_indexed_dims(const Aval& x, const Params& p, bool scatter) {
  const std::string& mode = p.get<std::string>("mode");
  if (scatter ? mode != "drop" : x.dtype == DType::Bool) return false;
  return p.is_none("out_sharding") || !p.has("out_sharding");
}

// The Auto axes `in[0]`'s type splits its (non-batching) indexed dims over,
// set in `xs` (the operand's layout in the plan), when the operation can run
// so (splits_indexed_dims).
AxisNames split_indexed_dims(const Avals& in, const Params& p, bool scatter, Spec& xs) {
  const Aval& x = in[0];
  if (!x.mesh || !splits_indexed_dims(x, p, scatter)) return {};
  const IntList batch = p.get_or<IntList>("batch_axes", IntList{});
  const Spec have = spec_of(x);
  AxisNames split;
  for (int64_t a : p.get<IntList>("axes")) {
    if (in_list(batch, a) || have[a].empty()) continue;
    for (const std::string& axis : have[a])
      if (x.mesh->is_explicit(axis)) return {};
    xs[a] = have[a];
    split.insert(split.end(), have[a].begin(), have[a].end());
  }
  return split;
}

// Gathers and scatters whose rule passed index whole (replicated) operand
// dims with indices replicated but on batch dims: each device works on its
// blocks, batch dims sharded alike on the operand, indices and
// result/updates (the kernel reads a batch dim's index from its position).
std::optional<LocalPlan> index_plan(const Avals& in, const Params& p, const Avals& out, bool scatter) {
  const IntList& axes = p.get<IntList>("axes");
  const IntList batch = p.get_or<IntList>("batch_axes", IntList{});
  const int64_t at = p.get<int64_t>("index_dims_at");
  const size_t first = scatter ? 2 : 1;
  const int64_t nb = static_cast<int64_t>(in[first].shape.size());
  const size_t ndim = in[0].shape.size();
  const Spec o = spec_of(out[0]);
  // The result's (gather) / updates' (scatter) spec, and the operand's.
  Spec r(ndim - axes.size() + nb), xs(ndim);
  for (size_t d = 0, k = 0; d < ndim; ++d) {
    if (in_list(axes, static_cast<int64_t>(d))) continue;
    if (static_cast<int64_t>(k) == at) k += nb;
    if (scatter) r[k] = xs[d] = o[d];
    else xs[d] = r[k] = o[k];
    ++k;
  }
  for (int64_t b : batch) {
    if (scatter) r[at + b] = xs[b] = o[b];
    else xs[b] = r[at + b] = o[at + b];
  }
  const Spec ispec(r.begin() + at, r.begin() + at + nb);
  LocalPlan plan;
  plan.params = p;
  if (const AxisNames split = split_indexed_dims(in, p, scatter, xs); !split.empty()) {
    Sharding blocks;
    blocks.mesh = in[0].mesh;
    blocks.spec = xs;
    const Shape local = blocks.local_shape(in[0].shape);
    IntList starts, sizes;
    for (int64_t a : axes) sizes.push_back(in[0].shape[a]);
    for (int64_t pos = 0; pos < blocks.mesh->size(); ++pos) {
      const std::vector<int64_t> index = blocks.block_index(pos, static_cast<int64_t>(ndim));
      starts.push_back(blocks.mesh->device_ids[pos]);
      for (int64_t a : axes) starts.push_back(index[a] * local[a]);
    }
    plan.params.set("index_blocks", starts);
    plan.params.set("index_sizes", sizes);
    if (!scatter) plan.reduce_axes = split;  // each device's partial result
  }
  plan.in_specs.push_back(xs);
  if (scatter) plan.in_specs.push_back(r);
  for (size_t i = first; i < in.size(); ++i) plan.in_specs.push_back(ispec);
  plan.out_specs.push_back(scatter ? xs : r);
  return plan;
}

// Sharding propagation over Auto axes (Shardy's gather/scatter rules for
// our form): an operand dim that is not indexed passes to the result (and,
// for a scatter, from the updates' window dim); the index arrays' dims give
// the gather result's batch dims; a batching dim (take_along_axis, `.at[:, i]`)
// links the operand's, the indices' and the result's (and updates') dim.
// A scatter's index dims are computed whole; indexed dims are split as
// index_plan runs them.
std::optional<FactorMap> index_factors(const Avals& in, const Params& p, const Avals& out, bool scatter) {
  const IntList& axes = p.get<IntList>("axes");
  const IntList batch = p.get_or<IntList>("batch_axes", IntList{});
  const int64_t at = p.get<int64_t>("index_dims_at");
  const size_t first = scatter ? 2 : 1;
  const int64_t nb = static_cast<int64_t>(in[first].shape.size());
  const int64_t ndim = in[0].ndim();
  FactorMap m = blank_factors(in, out);
  // gather: result dims; scatter: updates dims (the result is laid out as the operand).
  std::vector<int>& r = scatter ? m.in[1] : m.out[0];
  for (int64_t d = 0, k = 0; d < ndim; ++d) {
    if (in_list(axes, d)) continue;
    if (k == at) k += nb;
    m.in[0][d] = r[k++] = m.num_factors;
    if (scatter) m.out[0][d] = m.num_factors;
    ++m.num_factors;
  }
  // Indexed dims: each device looks up or updates its block (index_plan),
  // a gather's partial results summed (a contracted factor).
  if (splits_indexed_dims(in[0], p, scatter))
    for (int64_t a : axes)
      if (!in_list(batch, a)) {
        m.in[0][a] = m.num_factors;
        if (scatter) m.out[0][a] = m.num_factors;
        ++m.num_factors;
      }
  for (int64_t b = 0; b < nb; ++b) {
    const bool batching = in_list(batch, b);
    if (!batching && scatter) continue;
    const int f = m.num_factors++;
    r[at + b] = f;
    for (size_t i = first; i < in.size(); ++i) m.in[i][b] = f;
    if (batching) {
      m.in[0][b] = f;
      if (scatter) m.out[0][b] = f;
    }
  }
  return m;
}

std::vector<Spec> dynamic_update_slice_rule(const Avals& in, const Params&, const Avals&) {
  const Aval &x = in[0], &u = in[1];
  const Mesh& mesh = x.mesh ? *x.mesh : *u.mesh;
  const bool same_mesh = x.mesh && u.mesh && same_abstract_mesh(*x.mesh, *u.mesh);
  const bool both_replicated = is_replicated(spec_of(x)) && is_replicated(spec_of(u));
  if (!(same_mesh || both_replicated) || spec_of(x) != spec_of(u))
    fail<ShardingTypeError>("dynamic_update_slice operand sharding must be equal to update sharding, "
                            "got operand sharding ", str_with_axis_types(x, x.mesh ? *x.mesh : mesh),
                            " and update sharding ", str_with_axis_types(u, u.mesh ? *u.mesh : mesh), ".");
  return {spec_of(x)};
}

void gather() {
  Primitive p;
  p.name = "gather";
  // Indices point anywhere along the indexed dims, which the rules keep whole.
  p.sharding_rule = gather_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) { return index_plan(in, p, out, false); };
  p.factors = [](const Avals& in, const Params& p, const Avals& out) { return index_factors(in, p, out, false); };
  p.batch = gather_batch;
  p.vjp = gather_vjp;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    parse_mode("gather", params, false);
    const Aval& x = in[0];
    Layout l = check_indices("gather", x, Avals(in.begin() + 1, in.end()), params);
    return Avals{like(x, result_shape(l, x.shape), x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const Tensor& x = in[0];
    Layout l = layout_of(params, in[1].shape(), x.ndim());
    auto boff = batch_offsets(x, &in[1], l, parse_mode("gather", params, false), params);
    // A partitioned gather's partial results are summed over the operand's
    // blocks: elements of other blocks are zeros, and an index out of range
    // is filled by the device holding the first blocks only.
    bool fills = true;
    for (int64_t start : block_starts(params, l.axes.size())) fills &= start == 0;
    Tensor res = Tensor::empty(x.dtype(), out[0].shape);
    dispatch_any_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = res.data<T>();
      const T fill = fill_value<T>(params);
      walk(
          x, l, boff, res, [&](int64_t a, int64_t o) { dst[o] = src[a]; },
          [&](int64_t a, int64_t o, int64_t n) { std::memcpy(dst + o, src + a, n * sizeof(T)); },
          [&](int64_t o, int64_t why) { dst[o] = why == kOutOfRange && fills ? fill : T{}; });
    });
    return as_tensors(std::move(res));
  };
  register_primitive(std::move(p));
}

// combine(current, update) -> new value.
template <class Combine>
void scatter(const std::string& name, Combine combine,
             std::function<Cotangents(const VjpArgs&)> vjp = nullptr) {
  Primitive p;
  p.name = name;
  p.sharding_rule = scatter_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) { return index_plan(in, p, out, true); };
  p.factors = [](const Avals& in, const Params& p, const Avals& out) { return index_factors(in, p, out, true); };
  p.vjp = std::move(vjp);
  p.batch = scatter_batch;
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    parse_mode(name, params, true);
    const Aval &x = in[0], &upd = in[1];
    Layout l = check_indices(name, x, Avals(in.begin() + 2, in.end()), params);
    if (upd.dtype != x.dtype)
      fail<TypeError>(name, " updates must have the operand's dtype ", dtype_name(x.dtype), ", got ",
                      dtype_name(upd.dtype));
    Shape want = result_shape(l, x.shape);
    if (upd.shape != want)
      fail<ValueError>(name, " updates of shape ", shape_str(upd.shape), " do not match the indexed shape ",
                       shape_str(want));
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [combine](const Tensors& in, const Params& params, const Avals&) {
    const Tensor &x = in[0], &upd = in[1];
    Layout l = layout_of(params, in[2].shape(), x.ndim());
    Tensor res = x.copy();
    auto boff = batch_offsets(res, &in[2], l, parse_mode("scatter", params, true), params);
    auto dispatch = [&](auto&& f) {
      if (is_complex(x.dtype())) dispatch_complex(x.dtype(), f);
      else dispatch_dtype(x.dtype(), f);
    };
    dispatch([&](auto tag) {
      using T = decltype(tag);
      T* dst = res.data<T>();
      const T* u = upd.data<T>();
      auto update = [&](int64_t a, int64_t o) { dst[a] = combine(dst[a], u[o]); };
      walk(
          res, l, boff, upd, update,
          [&](int64_t a, int64_t o, int64_t n) {
            T* __restrict d = dst + a;
            const T* __restrict v = u + o;
            for (int64_t t = 0; t < n; ++t) d[t] = combine(d[t], v[t]);
          },
          [](int64_t, int64_t) {});
    });
    return as_tensors(std::move(res));
  };
  register_primitive(std::move(p));
}

// NaN-propagating, as lax.min/lax.max; complex numbers as lax.min/max
// compare them (complex_math.h).
template <class T>
T nan_min(T a, T b) {
  if constexpr (is_complex_v<T>) return min_op(a, b);
  else {
    if constexpr (std::is_floating_point_v<T>) if (std::isnan(a) || std::isnan(b)) return a + b;
    return b < a ? b : a;
  }
}
template <class T>
T nan_max(T a, T b) {
  if constexpr (is_complex_v<T>) return max_op(a, b);
  else {
    if constexpr (std::is_floating_point_v<T>) if (std::isnan(a) || std::isnan(b)) return a + b;
    return b > a ? b : a;
  }
}

// Start indices of a dynamic slice: negative ones count from the end, then
// each is clamped so the window of `sizes` fits (XLA's rule).
int64_t window_offset(const Tensor& operand, const Tensor* starts, const Shape& sizes) {
  int64_t off = 0;
  for (int64_t d = 0; d < operand.ndim(); ++d) {
    int64_t s = dispatch_integer(starts[d].dtype(), [&](auto tag) {
      return static_cast<int64_t>(*starts[d].data<decltype(tag)>());
    });
    const int64_t n = operand.shape()[d];
    if (s < 0) s += n;
    off += std::clamp<int64_t>(s, 0, n - sizes[d]) * operand.strides()[d];
  }
  return off;
}

void check_starts(const std::string& prim, const Aval& operand, const Avals& starts) {
  if (static_cast<int64_t>(starts.size()) != operand.ndim())
    fail<TypeError>(prim, " start_indices must have length equal to the number of dimensions of the "
                    "operand, got indices of length ", starts.size(), " for operand of shape ",
                    shape_str(operand.shape));
  for (const Aval& s : starts)
    if (!s.shape.empty() || !is_integer(s.dtype))
      fail<TypeError>(prim, " start indices must be integer scalars, got ", s.str());
}

void check_window(const std::string& prim, const Shape& window, const Shape& operand, const char* what) {
  for (size_t d = 0; d < operand.size(); ++d)
    if (window[d] < 0 || window[d] > operand[d])
      fail<TypeError>(prim, " ", what, " must be non-negative and at most the operand shape, got ",
                      what, " ", shape_str(window), " for operand shape ", shape_str(operand), ".");
}

// dynamic_slice(operand, *start_indices; slice_sizes): a zero-copy window.
void dynamic_slice() {
  Primitive p;
  p.name = "dynamic_slice";
  p.factors = same_size_factors;
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    return varying_shape_rule("dynamic_slice", in[0], out[0].shape);
  };
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    if (!sharded_dims_whole(in[0], out[0].shape)) return std::nullopt;
    return local_shape_plan("slice_sizes")(in, p, out);
  };
  // Unbatched starts: one more dimension, sliced whole. Batched ones: a gather.
  p.batch = [](const BatchArgs& a) {
    const Shape& sizes = a.params.get<IntList>("slice_sizes");
    if (!any_batched(a.dims, 1)) {
      Values starts{ops::full({}, a.in.size() > 1 ? aval_of(a.in[1]).dtype : DType::Int32, 0.0)};
      starts.insert(starts.end(), a.in.begin() + 1, a.in.end());
      Shape batched_sizes{a.size};
      batched_sizes.insert(batched_sizes.end(), sizes.begin(), sizes.end());
      return Batched{{ops::dynamic_slice(batch_at(a.in[0], a.dims[0], 0, a.size), starts, batched_sizes)}, {0}};
    }
    Values idx = window_indices(a, 1, sizes);
    IntList axes;
    for (size_t k = 0; k < sizes.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    Value x = a.in[0];
    if (a.dims[0] != kNotBatched) {
      x = batch_at(x, a.dims[0], 0, a.size);
      axes = shift_axes(axes);
      axes.insert(axes.begin(), 0);
      idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
    }
    return Batched{{ops::gather(x, idx, axes, 0, "clip")}, {0}};
  };
  p.vjp = dynamic_slice_vjp;
  // Only the window is read (and the starts), as XLA's cost analysis counts it.
  p.cost = [](const Avals& in, const Params&, const Avals& out) {
    Avals read{out[0]};
    read.insert(read.end(), in.begin() + 1, in.end());
    return memory_cost(read, out);
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& sizes = params.get<IntList>("slice_sizes");
    const Aval& x = in[0];
    check_starts("dynamic_slice", x, Avals(in.begin() + 1, in.end()));
    if (static_cast<int64_t>(sizes.size()) != x.ndim())
      fail<TypeError>("dynamic_slice slice_sizes must have the same length as the operand's shape ",
                      shape_str(x.shape), ", got ", shape_str(sizes));
    check_window("dynamic_slice", sizes, x.shape, "slice_sizes");
    return Avals{like(x, sizes, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    const Tensor& x = in[0];
    return as_tensors(x.view(out[0].shape, x.strides(), window_offset(x, &in[1], out[0].shape)));
  };
  register_primitive(std::move(p));
}

// dynamic_update_slice(operand, update, *start_indices).
void dynamic_update_slice() {
  Primitive p;
  p.name = "dynamic_update_slice";
  p.factors = same_size_factors;
  // The update is written where it lands: on the assembled value (no local plan).
  p.sharding_rule = dynamic_update_slice_rule;
  // Unbatched starts: one more dimension, updated whole. Batched: a scatter.
  p.batch = [](const BatchArgs& a) {
    const Value x = batch_at(a.in[0], a.dims[0], 0, a.size), upd = batch_at(a.in[1], a.dims[1], 0, a.size);
    if (!any_batched(a.dims, 2)) {
      Values starts{ops::full({}, a.in.size() > 2 ? aval_of(a.in[2]).dtype : DType::Int32, 0.0)};
      starts.insert(starts.end(), a.in.begin() + 2, a.in.end());
      return Batched{{ops::dynamic_update_slice(x, upd, starts)}, {0}};
    }
    const Shape& per_example = aval_of(a.in[1]).shape;
    Shape window = per_example;
    if (a.dims[1] != kNotBatched) window.erase(window.begin() + a.dims[1]);
    // Indices computed against the batched operand (batch at 0, so shift by one).
    const BatchDims dims_at_front = [&] {
      BatchDims d = a.dims;
      d[0] = 0;
      return d;
    }();
    const Values in_front = [&] {
      Values v = a.in;
      v[0] = x;
      return v;
    }();
    Values idx = window_indices(BatchArgs{a.prim, in_front, dims_at_front, a.params, a.size}, 2, window);
    IntList axes{0};
    for (size_t k = 0; k < window.size(); ++k) axes.push_back(static_cast<int64_t>(k) + 1);
    idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
    return Batched{{ops::scatter("scatter", x, upd, idx, axes, 0, "clip")}, {0}};
  };
  p.vjp = dynamic_update_slice_vjp;
  // In place: the update (and the starts) read, the update's window written.
  p.cost = [](const Avals& in, const Params&, const Avals&) {
    return memory_cost(Avals(in.begin() + 1, in.end()), Avals{in[1]});
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &x = in[0], &upd = in[1];
    check_starts("dynamic_update_slice", x, Avals(in.begin() + 2, in.end()));
    if (upd.dtype != x.dtype)
      fail<TypeError>("dynamic_update_slice update must have the operand's dtype ", dtype_name(x.dtype),
                      ", got ", dtype_name(upd.dtype));
    if (upd.ndim() != x.ndim())
      fail<TypeError>("dynamic_update_slice update must have the operand's rank, got update shape ",
                      shape_str(upd.shape), " for operand shape ", shape_str(x.shape));
    check_window("dynamic_update_slice", upd.shape, x.shape, "update shape");
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) {
    const Tensor& upd = in[1];
    Tensor res = in[0].copy();
    Tensor window = res.view(upd.shape(), res.strides(), window_offset(res, &in[2], upd.shape()));
    dispatch_any_dtype(res.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = window.data<T>();
      const T* src = upd.data<T>();
      for_each_offsets<2>(upd.shape(), {&window.strides(), &upd.strides()},
                          [&](const std::array<int64_t, 2>& o) { dst[o[0]] = src[o[1]]; });
    });
    return as_tensors(std::move(res));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_indexing_primitives() {
  gather();
  scatter("scatter", [](auto, auto u) { return u; }, scatter_vjp);
  scatter("scatter_add", [](auto a, auto u) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a || u;
    else if constexpr (is_complex_v<decltype(a)>) return add_op(a, u);
    else return static_cast<decltype(a)>(a + u);
  }, scatter_add_vjp);
  scatter("scatter_mul", [](auto a, auto u) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a && u;
    else if constexpr (is_complex_v<decltype(a)>) return mul_op(u, a);  // XLA's fused products, update first
    else return static_cast<decltype(a)>(a * u);
  }, scatter_mul_vjp);
  scatter("scatter_min", [](auto a, auto u) { return nan_min(a, u); }, scatter_extremal_vjp);
  scatter("scatter_max", [](auto a, auto u) { return nan_max(a, u); }, scatter_extremal_vjp);
  dynamic_slice();
  dynamic_update_slice();
}

}  // namespace meshsim
