// What gathers and scatters share (indexing_common.h): the form's checks and
// batch offsets, VJP and batching helpers, sharding plans and factors.
#include "meshsim/primitives/indexing_common.h"

#include <algorithm>
#include <set>

#include "meshsim/ir/ops.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/runtime/timeline.h"

namespace meshsim::indexing {

OutOfBounds parse_mode(const std::string& prim, const Params& params, bool is_scatter) {
  const std::string& mode = params.get<std::string>("mode");
  if (mode == "clip") return OutOfBounds::Clip;
  if (!is_scatter && mode == "fill") return OutOfBounds::Fill;
  if (!is_scatter && mode == "wrap") return OutOfBounds::Wrap;
  if (is_scatter && mode == "drop") return OutOfBounds::Drop;
  fail<ValueError>(prim, ": unsupported mode '", mode, "'; expected ",
                   is_scatter ? "'clip' or 'drop'" : "'clip', 'fill' or 'wrap'");
}

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

std::vector<int64_t> block_starts(const Params& params, size_t num_axes) {
  if (!params.has("index_blocks")) return {};
  const IntList& blocks = params.get<IntList>("index_blocks");
  const int64_t device = timeline::current_device();
  for (size_t k = 0; k + num_axes < blocks.size(); k += num_axes + 1)
    if (blocks[k] == device) return std::vector<int64_t>(blocks.begin() + k + 1, blocks.begin() + k + 1 + num_axes);
  fail<std::runtime_error>("a partitioned gather or scatter runs on device ", device, ", which holds no block");
}

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

std::pair<Shape, Strides> pick(const Tensor& t, const IntList& dims) {
  Shape s;
  Strides st;
  s.reserve(dims.size());
  st.reserve(dims.size());
  for (int64_t d : dims) {
    s.push_back(t.shape()[d]);
    st.push_back(t.strides()[d]);
  }
  return {std::move(s), std::move(st)};
}

IntList range(int64_t lo, int64_t hi) {
  IntList r;
  r.reserve(std::max<int64_t>(hi - lo, 0));
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

IndexArgs index_args(const VjpArgs& a, size_t first) {
  return {Values(a.in.begin() + first, a.in.end()), a.params.get<IntList>("axes"),
          a.params.get<int64_t>("index_dims_at"), a.params.get_or<IntList>("batch_axes", IntList{})};
}

Value whole(const Value& v) {
  Aval r = aval_of(v);
  r.spec.assign(r.shape.size(), AxisNames{});
  return ops::reshard_like(v, r);
}

bool any_batched(const BatchDims& dims, size_t first) {
  for (size_t i = first; i < dims.size(); ++i)
    if (dims[i] != kNotBatched) return true;
  return false;
}

bool set_batch_axes(Params& params) {
  const IntList batch_axes = params.get_or<IntList>("batch_axes", IntList{});
  if (batch_axes.empty()) return false;
  IntList shifted = shift_axes(batch_axes);
  shifted.insert(shifted.begin(), 0);
  params.set("batch_axes", shifted);
  return true;
}

Values batched_indices(const BatchArgs& a, size_t first) {
  Values idx;
  for (size_t i = first; i < a.in.size(); ++i) idx.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
  idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
  return idx;
}

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

Aval jax_indices_aval(const Avals& indices, const Spec& bspec) {
  Aval a = indices[0];
  a.shape.push_back(static_cast<int64_t>(indices.size()));
  a.spec = bspec;
  a.spec.push_back({});
  a.vma.clear();
  return a;
}

namespace {

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

}  // namespace

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

}  // namespace meshsim::indexing
