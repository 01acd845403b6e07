// Structural primitives: they move or view data without arithmetic.
// broadcast_in_dim, transpose, reshape of contiguous data, rev and squeeze
// are zero-copy views; copy writes one fresh buffer. The primitives that
// change a dimension's size or add one (slice, concatenate, stack, unstack,
// pad) are in structural_resizing.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "meshsim/core/sub_axes.h"
#include "meshsim/ir/printing.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/structural_resizing.h"
#include "meshsim/runtime/timeline.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

// ---- sharding propagation over Auto axes: factor maps (sharding/factors.h) ------

std::optional<FactorMap> transpose_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank_factors(in, out);
  const IntList& perm = p.get<IntList>("permutation");
  for (size_t d = 0; d < perm.size(); ++d) m.in[0][perm[d]] = m.out[0][d] = m.num_factors++;
  return m;
}

// Operand dims kept at full size pass through; broadcast (new or size-1)
// result dims are factors of the result alone.
std::optional<FactorMap> broadcast_in_dim_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank_factors(in, out);
  const IntList& dims = p.get<IntList>("broadcast_dimensions");
  std::vector<bool> from_operand(out[0].shape.size(), false);
  for (size_t d = 0; d < dims.size(); ++d)
    if (in[0].shape[d] == out[0].shape[dims[d]]) {
      m.in[0][d] = m.out[0][dims[d]] = m.num_factors++;
      from_operand[dims[d]] = true;
    }
  for (size_t d = 0; d < from_operand.size(); ++d)
    if (!from_operand[d] && out[0].shape[d] > 1) m.out[0][d] = m.num_factors++;
  return m;
}

// Dimensions are grouped where their products agree; a dimension that is a
// whole group on one side shares its factor with the group's first non-unit
// dimension on the other (its blocks stay contiguous); the rest are whole. A
// reshape with an explicit out_sharding takes no part.
std::optional<FactorMap> reshape_factors(const Avals& in, const Params& p, const Avals& out) {
  if (!p.is_none("out_sharding")) return std::nullopt;
  FactorMap m = blank_factors(in, out);
  const Shape &a = in[0].shape, &b = out[0].shape;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == 1) { ++i; continue; }
    if (b[j] == 1) { ++j; continue; }
    size_t i_end = i + 1, j_end = j + 1;
    int64_t pa = a[i], pb = b[j];
    while (pa != pb) {
      if (pa < pb) {
        if (i_end == a.size()) return m;
        pa *= a[i_end++];
      } else {
        if (j_end == b.size()) return m;
        pb *= b[j_end++];
      }
    }
    if (i_end == i + 1 || j_end == j + 1) m.in[0][i] = m.out[0][j] = m.num_factors++;
    i = i_end;
    j = j_end;
  }
  return m;
}

std::optional<FactorMap> squeeze_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank_factors(in, out);
  const IntList& dims = p.get<IntList>("dimensions");
  size_t k = 0;
  for (int64_t d = 0; d < in[0].ndim(); ++d)
    if (!in_list(dims, d)) m.in[0][d] = m.out[0][k++] = m.num_factors++;
  return m;
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

std::vector<Spec> transpose_rule(const Avals& in, const Params& p, const Avals&) {
  const Spec s = spec_of(in[0]);
  Spec o;
  for (int64_t d : p.get<IntList>("permutation")) o.push_back(s[d]);
  return {o};
}

std::vector<Spec> broadcast_in_dim_rule(const Avals& in, const Params& p, const Avals& out) {
  if (auto asked = out_sharding_param(p, out[0].shape.size())) return {*asked};
  const Spec s = spec_of(in[0]);
  const IntList& dims = p.get<IntList>("broadcast_dimensions");
  Spec o(out[0].shape.size());
  for (size_t i = 0; i < dims.size(); ++i) o[dims[i]] = s[i];
  return {o};
}

std::vector<Spec> squeeze_rule(const Avals& in, const Params& p, const Avals&) {
  return {drop_dims(spec_of(in[0]), p.get<IntList>("dimensions"))};
}

[[noreturn]] void reshape_error(const Aval& x, const IntList& new_sizes) {
  std::string sizes = "(";
  for (size_t i = 0; i < new_sizes.size(); ++i) sizes += (i ? ", " : "") + std::to_string(new_sizes[i]);
  sizes += new_sizes.size() == 1 ? ",)" : ")";
  fail<ShardingTypeError>("This reshape is not supported. Please specify the sharding of the output "
                          "via the `out_sharding` argument of jax.lax.reshape. Got operand type: ",
                          x.str(), ", new sizes: ", sizes);
}

struct Group {  // one operand dim kept, or split into several (`parts`)
  bool split = false;
  IntList parts;
};

struct TooManySplits {};

// JAX's _split_on_one_axis: nullopt when `to` is not `from` with one dim split.
std::optional<std::vector<Group>> split_on_one_axis(IntList from, IntList to) {
  if (to.size() <= from.size()) return std::nullopt;
  const size_t orig = from.size();
  size_t ones = 0;
  while (!from.empty() && !to.empty() && from.back() == 1 && to.back() == 1) {
    ++ones;
    from.pop_back();
    to.pop_back();
  }
  std::vector<Group> out;
  size_t i = 0, j = 0;
  int count = 0;
  while (j < to.size()) {
    if (i >= from.size()) return std::nullopt;
    if (from[i] == to[j]) {
      out.push_back({false, {from[i]}});
    } else {
      if (++count > 1) throw TooManySplits{};
      IntList temp{to[j]};
      auto prod = [&] { int64_t p = 1; for (int64_t t : temp) p *= t; return p; };
      size_t next_j = j + 1, next_i = i + 1;
      while (prod() != from[i] || (next_j < to.size() && to[next_j] == 1)) {
        if (prod() > from[i]) return std::nullopt;
        if (prod() == from[i] && next_i < from.size() && next_j < to.size() && to[next_j] == from[next_i])
          break;
        if (++j >= to.size()) return std::nullopt;
        temp.push_back(to[j]);
        ++next_j;
      }
      out.push_back({true, temp});
    }
    ++i;
    ++j;
  }
  for (size_t k = 0; k < ones; ++k) out.push_back({false, {1}});
  if (out.size() != orig) return std::nullopt;
  return out;
}

std::vector<AxisNames> split_partitions(const Mesh& mesh, const AxisNames& axes, const IntList& sizes,
                                        const Aval& x, const IntList& new_sizes) {
  size_t k = 0;
  std::vector<AxisNames> parts;
  for (int64_t o : sizes) {
    AxisNames part;
    while (o > 1 && k < axes.size()) {
      const int64_t n = mesh.axis_size(axes[k]);
      if (o % n != 0) reshape_error(x, new_sizes);
      o /= n;
      part.push_back(axes[k++]);
    }
    parts.push_back(part);
  }
  if (k != axes.size()) reshape_error(x, new_sizes);
  return parts;
}

std::vector<Spec> reshape_rule(const Avals& in, const Params& p, const Avals& out) {
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const Aval& x = in[0];
  const IntList& new_sizes = p.get<IntList>("new_sizes");
  const Spec s = spec_of(x);
  IntList a, b;
  for (int64_t v : x.shape) if (v != 1) a.push_back(v);
  for (int64_t v : new_sizes) if (v != 1) b.push_back(v);
  if (a == b) {  // only singleton dims come or go
    Spec o;
    size_t k = 0;
    for (int64_t n : new_sizes) {
      if (n == 1) { o.push_back({}); continue; }
      while (x.shape[k] == 1) ++k;
      o.push_back(s[k++]);
    }
    return {o};
  }
  try {
    if (auto split = split_on_one_axis(x.shape, new_sizes)) {
      Spec o;
      for (size_t d = 0; d < split->size(); ++d) {
        const Group& g = (*split)[d];
        if (!g.split) { o.push_back(s[d]); continue; }
        if (s[d].empty()) { o.resize(o.size() + g.parts.size()); continue; }
        for (auto& part : split_partitions(*x.mesh, s[d], g.parts, x, new_sizes)) o.push_back(part);
      }
      return {o};
    }
    if (new_sizes.size() < x.shape.size())
      if (auto merge = split_on_one_axis(new_sizes, x.shape)) {
        Spec o;
        size_t k = 0;
        for (size_t d = 0; d < merge->size(); ++d) {
          const Group& g = (*merge)[d];
          if (!g.split) { o.push_back(s[k++]); continue; }
          AxisNames flat;
          bool gap = false, any = false;
          std::vector<bool> sharded;
          for (size_t m = 0; m < g.parts.size(); ++m) sharded.push_back(!s[k + m].empty());
          size_t last = sharded.size();
          while (last > 0 && !sharded[last - 1]) --last;  // strip trailing Nones
          for (size_t m = 0; m < last; ++m) {
            if (!sharded[m]) gap = true;
            any |= sharded[m];
            flat.insert(flat.end(), s[k + m].begin(), s[k + m].end());
          }
          k += g.parts.size();
          if (!any) { o.push_back({}); continue; }
          if (gap) reshape_error(x, new_sizes);
          o.push_back(split_partitions(*x.mesh, flat, {new_sizes[d]}, x, new_sizes)[0]);
        }
        return {o};
      }
  } catch (const TooManySplits&) {
  }
  reshape_error(x, new_sizes);
}

// The layout of a reshape's result that splits dims of `x` over sub-axes
// where a part holds only some of an axis's devices (Shardy's reshape rule,
// core/sub_axes.h); nullopt when the reshape is no split or an axis finds no
// place.
std::optional<Spec> split_over_sub_axes(const Aval& x, const IntList& new_sizes) {
  std::optional<std::vector<Group>> split;
  try { split = split_on_one_axis(x.shape, new_sizes); } catch (const TooManySplits&) {}
  if (!split || !x.mesh) return std::nullopt;
  const Spec s = spec_of(x);
  Spec o;
  for (size_t d = 0; d < split->size(); ++d) {
    const Group& g = (*split)[d];
    if (!g.split) { o.push_back(s[d]); continue; }
    size_t placed = 0;
    std::vector<AxisNames> parts = axes_of_parts(*x.mesh, s[d], g.parts, &placed);
    if (placed != s[d].size()) return std::nullopt;
    for (AxisNames& part : parts) o.push_back(std::move(part));
  }
  return o;
}

// Whether dims [first, first + count) of an operand laid out as `spec` merge
// into one laid out as `merged` with every block staying where it is: their
// axes in order are `merged`'s, and every dim before the last sharded one is
// split into blocks of one.
bool merges_in_place(const Mesh& mesh, const Spec& spec, const Shape& shape, size_t first, size_t count,
                     const AxisNames& merged) {
  AxisNames axes;
  size_t last = first;
  for (size_t m = first; m < first + count; ++m) {
    axes.insert(axes.end(), spec[m].begin(), spec[m].end());
    if (!spec[m].empty()) last = m;
  }
  if (joined_sub_axes(mesh, axes) != merged) return false;
  for (size_t m = first; m < last; ++m)
    if (entry_size(mesh, spec[m]) != shape[m]) return false;
  return true;
}

// The operand layout that JAX's rule reshapes into `out_sharding`, when the
// operand reaches it by gathering only (each dim keeps a major part of its
// axes): XLA's partitioner gathers the operand to it and reshapes locally,
// rather than reshaping the blocks and gathering the result dim by dim.
std::optional<Spec> gathered_operand_layout(const Aval& x, const Params& p, const Aval& out,
                                            const Spec& out_sharding) {
  Params back = p, forth = p;
  back.set("out_sharding", std::monostate{});
  back.set("new_sizes", IntList(x.shape.begin(), x.shape.end()));
  forth.set("out_sharding", std::monostate{});
  Aval target = out, operand = x;
  target.spec = out_sharding;
  Spec layout;
  try {
    layout = reshape_rule({target}, back, {x})[0];
    operand.spec = layout;
    if (reshape_rule({operand}, forth, {out})[0] != out_sharding) return std::nullopt;
  } catch (const ShardingTypeError&) {
    return std::nullopt;
  }
  const Spec s = spec_of(x);
  layout.resize(s.size());
  for (size_t d = 0; d < layout.size(); ++d)
    if (layout[d].size() > s[d].size() || !std::equal(layout[d].begin(), layout[d].end(), s[d].begin()))
      return std::nullopt;
  return layout;
}

// A reshape is local when every device's block is a contiguous run of the
// row-major order that the result's block is too: always for JAX's split
// rule; for a merge, when only the first dimension of each merged group is
// sharded. With `out_sharding`, the operand is gathered to the layout that
// reshapes into it where it can be; otherwise the result is made so where the
// operand's type gives one, then resharded as asked (run_local's final reshard).
std::optional<LocalPlan> reshape_plan(const Avals& in, const Params& p_in, const Avals& out_in) {
  const Aval& x = in[0];
  Params p = p_in;
  Avals out = out_in;
  if (auto target = out_sharding_param(p, out[0].shape.size())) {
    if (auto layout = gathered_operand_layout(x, p, out[0], *target); layout && *layout != spec_of(x)) {
      out[0].spec = *target;
      p.set("out_sharding", std::monostate{});
      std::optional<LocalPlan> plan = local_shape_plan("new_sizes")(in, p, out);
      plan->in_specs[0] = *layout;
      return plan;
    }
  }
  if (!p.is_none("out_sharding")) {
    p.set("out_sharding", std::monostate{});
    try {
      out[0].spec = reshape_rule(in, p, out)[0];
    } catch (const ShardingTypeError&) {
      return std::nullopt;  // no natural layout: on the whole value
    }
  }
  const IntList& new_sizes = p.get<IntList>("new_sizes");
  Spec in_spec = spec_of(x);
  IntList kept_in, kept_out;  // the dims that are not singletons
  for (int64_t v : x.shape) if (v != 1) kept_in.push_back(v);
  for (int64_t v : new_sizes) if (v != 1) kept_out.push_back(v);
  if (kept_in == kept_out) {
    // Only singleton dims come or go: every block keeps its elements.
    out[0].spec = reshape_rule(in, p, out)[0];
  } else if (new_sizes.size() < x.shape.size()) {
    std::optional<std::vector<Group>> merge;
    try { merge = split_on_one_axis(new_sizes, x.shape); } catch (const TooManySplits&) {}
    if (!merge) return std::nullopt;
    // A merged group whose later dims are sharded first moves all of the
    // result's axes to its first dim (an all-to-all), then merges locally.
    const Spec o = spec_of(out[0]);
    size_t k = 0;
    for (size_t d = 0; d < merge->size(); ++d) {
      const Group& g = (*merge)[d];
      if (!g.split) { ++k; continue; }
      if (merges_in_place(*x.mesh, in_spec, x.shape, k, g.parts.size(), o[d])) {
        k += g.parts.size();
        continue;
      }
      if (x.shape[k] % entry_size(*x.mesh, o[d]) != 0) return std::nullopt;
      in_spec[k] = o[d];
      for (size_t m = 1; m < g.parts.size(); ++m) in_spec[k + m].clear();
      k += g.parts.size();
    }
  } else if (p_in.is_none("out_sharding")) {
    // The result laid out as JAX's rule lays out the operand's blocks (its
    // type may differ under sharding propagation: run_local reshards it),
    // or, where a part holds only some of an axis's devices, over sub-axes
    // as propagation lays out Auto axes.
    try {
      out[0].spec = reshape_rule(in, p, out)[0];
    } catch (const ShardingTypeError&) {
      std::optional<Spec> split = split_over_sub_axes(x, new_sizes);
      if (!split) return std::nullopt;
      out[0].spec = *split;
    }
  }
  std::optional<LocalPlan> plan = local_shape_plan("new_sizes")(in, p, out);
  plan->in_specs[0] = in_spec;
  return plan;
}

// Operand dimensions named by a primitive's `dimensions` parameter: in range
// and unique, or a TypeError/ValueError in the primitive's own words.
void check_dimensions(const char* prim, const IntList& dims, int64_t ndim) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= ndim)
      fail<ValueError>(prim, " dimensions outside range [0, ndim): ", param_value_str(dims),
                       " for operand ndim ", ndim);
    if (std::count(dims.begin(), dims.end(), dims[i]) > 1)
      fail<ValueError>(prim, " dimensions are not unique: ", param_value_str(dims));
  }
}

// lax.broadcast_in_dim(x, shape, broadcast_dimensions): operand dim i maps to
// output dim broadcast_dimensions[i] and must be 1 or equal to it.
void broadcast_in_dim() {
  Primitive p;
  p.name = "broadcast_in_dim";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  // JAX's pp rule: the result's type shows shape and sharding; no dims, none
  // printed; dims its batching rule shifted print as np.int64.
  p.print_rule = [](PrintedEquation& e) {
    e.hide("shape");
    e.hide("sharding");
    e.hide("out_sharding");
    const auto* dims = std::get_if<IntList>(e.find("broadcast_dimensions"));
    if (dims && dims->empty()) e.hide("broadcast_dimensions");
    else if (dims && e.eqn.params.has("numpy_dims"))
      e.spell("broadcast_dimensions", numpy_tuple_str(*dims, &e.eqn.params.get<IntList>("numpy_dims")));
  };
  p.sharding_rule = broadcast_in_dim_rule;
  // With an `out_sharding` (JAX's `sharding`), each operand dim is first laid out
  // as the result dim it becomes, so that every device broadcasts its own block.
  p.local_plan = [](const Avals& in, const Params& params, const Avals& out) {
    std::optional<LocalPlan> plan = local_shape_plan("shape")(in, params, out);
    if (plan && !params.is_none("out_sharding")) {
      const IntList& dims = params.get<IntList>("broadcast_dimensions");
      const Spec result = spec_of(out[0]);
      Spec& operand = plan->in_specs[0];
      for (size_t i = 0; i < dims.size(); ++i)
        operand[i] = in[0].shape[i] == 1 ? AxisNames{} : result[dims[i]];
      plan->params.set("out_sharding", std::monostate{});
    }
    return plan;
  };
  p.factors = broadcast_in_dim_factors;
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    IntList shape{a.size}, dims{0};
    for (int64_t d : a.params.get<IntList>("shape")) shape.push_back(d);
    for (int64_t d : a.params.get<IntList>("broadcast_dimensions")) dims.push_back(d + 1);
    params.set("shape", shape);
    params.set("broadcast_dimensions", dims);
    if (auto asked = spec_param(a.params, "out_sharding")) {  // the batch dim is whole
      asked->insert(asked->begin(), AxisNames{});
      params.set("out_sharding", std::vector<StrList>(*asked));
    }
    // JAX shifts the dims with np.add: its jaxprs print them as np.int64 (ir/program.cpp).
    IntList numpy(dims.size(), 1);
    numpy[0] = 0;
    params.set("numpy_dims", numpy);
    return bind_at_front(a, params);
  };
  // As JAX transposes it: summed over every result dim but the operand's dims of
  // size > 1 (laid out as those dims of the operand where its type has Explicit
  // axes), then the operand's size-1 dims put back (`broadcast_in_dim`).
  p.vjp = [](const VjpArgs& a) {
    const Aval& primal = aval_of(a.in[0]);
    const Shape& shape = primal.shape;
    const IntList& dims = a.params.get<IntList>("broadcast_dimensions");
    const std::optional<Spec> primal_spec = cotangent_out_sharding(primal);
    IntList kept, kept_positions, summed;
    Spec kept_spec;
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] != 1) {
        kept.push_back(dims[i]);
        kept_positions.push_back(static_cast<int64_t>(i));
        if (primal_spec) kept_spec.push_back((*primal_spec)[i]);
      }
    for (int64_t d = 0; d < aval_of(*a.ct[0]).ndim(); ++d)
      if (!in_list(kept, d)) summed.push_back(d);
    Params params{{"axes", summed}};
    if (primal_spec) params.set("out_sharding", std::vector<StrList>(kept_spec));
    const Value sum = summed.empty() ? *a.ct[0] : ops::bind1("reduce_sum", {*a.ct[0]}, params);
    return Cotangents{ops::broadcast_in_dim(sum, shape, kept_positions)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& shape = params.get<IntList>("shape");
    const IntList& dims = params.get<IntList>("broadcast_dimensions");
    const Aval& x = in[0];
    if (static_cast<int64_t>(dims.size()) != x.ndim())
      fail<TypeError>("broadcast_in_dim broadcast_dimensions must have length equal to operand ndim; "
                      "got broadcast_dimensions ", param_value_str(dims), " for operand ndim ", x.ndim(), ".");
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()))
        fail<TypeError>("broadcast_in_dim broadcast_dimensions must be valid indices of shape ",
                        shape_str(shape), ", got ", param_value_str(dims));
      if (i > 0 && dims[i] <= dims[i - 1])
        fail<TypeError>("broadcast_in_dim broadcast_dimensions must be strictly increasing; got ",
                        param_value_str(dims));
      if (x.shape[i] != 1 && x.shape[i] != shape[dims[i]])
        fail<TypeError>("broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                        "their corresponding dimensions in the target broadcast shape; got operand "
                        "of shape ", shape_str(x.shape), ", target broadcast shape ", shape_str(shape),
                        ", broadcast_dimensions ", param_value_str(dims));
    }
    return Avals{like(x, shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const IntList& dims = params.get<IntList>("broadcast_dimensions");
    const Tensor& x = in[0];
    Strides st(out[0].shape.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i)
      if (x.shape()[i] != 1) st[dims[i]] = x.strides()[i];
    return as_tensors(x.view(out[0].shape, st, 0));
  };
  register_primitive(std::move(p));
}

void reshape() {
  Primitive p;
  p.name = "reshape";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.ur_rule = keep_operand_ur();  // moves elements: linear
  // JAX's params this one does not store; an `out_sharding` prints as JAX's
  // `sharding`, the result's NamedSharding.
  p.print_rule = [](PrintedEquation& e) {
    e.add("dimensions");
    const ParamValue* asked = e.find("out_sharding");
    const bool given = asked && !std::holds_alternative<std::monostate>(*asked);
    e.hide("out_sharding");
    e.add("sharding", {}, given ? type_sharding_repr(e.program.avals[e.eqn.outputs[0]]) : "");
  };
  p.sharding_rule = reshape_rule;
  p.local_plan = reshape_plan;
  p.factors = reshape_factors;
  p.regroups_dims = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.result_is_operand_view = true;
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    IntList shape{a.size};
    for (int64_t d : a.params.get<IntList>("new_sizes")) shape.push_back(d);
    params.set("new_sizes", shape);
    return bind_at_front(a, params);
  };
  p.vjp = [](const VjpArgs& a) { return Cotangents{ops::reshape(*a.ct[0], aval_of(a.in[0]).shape)}; };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& shape = params.get<IntList>("new_sizes");
    if (num_elements(shape) != num_elements(in[0].shape))
      fail<TypeError>("cannot reshape array of shape ", shape_str(in[0].shape), " (size ",
                      num_elements(in[0].shape), ") into shape ", shape_str(shape), " (size ",
                      num_elements(shape), ")");
    return Avals{like(in[0], shape, in[0].dtype, in[0].weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return as_tensors(in[0].reshape(out[0].shape));
  };
  register_primitive(std::move(p));
}

void transpose() {
  Primitive p;
  p.name = "transpose";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.ur_rule = keep_operand_ur();
  p.sharding_rule = transpose_rule;
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    return LocalPlan{{spec_of(in[0])}, p, transpose_rule(in, p, out), {}};
  };
  p.factors = transpose_factors;
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    IntList perm{0};
    for (int64_t d : shift_axes(a.params.get<IntList>("permutation"))) perm.push_back(d);
    params.set("permutation", perm);
    return bind_at_front(a, params);
  };
  p.vjp = [](const VjpArgs& a) {
    const IntList& perm = a.params.get<IntList>("permutation");
    IntList inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
    return Cotangents{ops::transpose(*a.ct[0], inverse)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const IntList& perm = params.get<IntList>("permutation");
    const Aval& x = in[0];
    IntList sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    IntList iota(x.ndim());
    std::iota(iota.begin(), iota.end(), 0);
    if (sorted != iota)
      fail<TypeError>("transpose permutation isn't a permutation of operand dimensions, got "
                      "permutation ", param_value_str(perm), " for operand shape ", shape_str(x.shape), ".");
    Shape s;
    for (int64_t d : perm) s.push_back(x.shape[d]);
    return Avals{like(x, s, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    return as_tensors(in[0].transpose(params.get<IntList>("permutation")));
  };
  register_primitive(std::move(p));
}

// lax.squeeze: drops size-1 dimensions (a view).
void squeeze() {
  Primitive p;
  p.name = "squeeze";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.result_is_operand_view = true;
  p.ur_rule = keep_operand_ur();
  p.sharding_rule = squeeze_rule;
  p.local_plan = as_is_plan(nullptr);
  p.factors = squeeze_factors;
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    params.set("dimensions", shift_axes(a.params.get<IntList>("dimensions")));
    return bind_at_front(a, params);
  };
  p.vjp = [](const VjpArgs& a) { return Cotangents{ops::reshape(*a.ct[0], aval_of(a.in[0]).shape)}; };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const IntList& dims = params.get<IntList>("dimensions");
    const Aval& x = in[0];
    check_dimensions("squeeze", dims, x.ndim());
    Shape s;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) s.push_back(x.shape[d]);
      else if (x.shape[d] != 1)
        fail<ValueError>("cannot select an axis to squeeze out which has size not equal to one, "
                         "got shape=", shape_str(x.shape), " and dimensions=", param_value_str(dims));
    }
    return Avals{like(x, s, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const IntList& dims = params.get<IntList>("dimensions");
    const Tensor& x = in[0];
    Strides st;
    for (int64_t d = 0; d < x.ndim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) st.push_back(x.strides()[d]);
    return as_tensors(x.view(out[0].shape, st, 0));
  };
  register_primitive(std::move(p));
}

// lax.rev: reverses the order of elements along `dimensions` (a view with
// negated strides).
void rev() {
  Primitive p;
  p.name = "rev";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.factors = whole_dims_factors("dimensions", false);
  p.sharding_rule = same_as_operand;
  p.local_plan = as_is_plan([](const Avals& in, const Params& p, const Avals&) {
    for (int64_t d : p.get<IntList>("dimensions"))
      if (!spec_of(in[0])[d].empty()) return false;
    return true;
  });
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    params.set("dimensions", shift_axes(a.params.get<IntList>("dimensions")));
    return bind_at_front(a, params);
  };
  p.vjp = [](const VjpArgs& a) { return Cotangents{ops::rev(*a.ct[0], a.params.get<IntList>("dimensions"))}; };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const IntList& dims = params.get<IntList>("dimensions");
    const Aval& x = in[0];
    for (int64_t d : dims) {
      if (d < 0 || d >= x.ndim())
        fail<TypeError>("rev dimensions must all be less than operand ndim, got dimensions ",
                        param_value_str(dims), " for operand ndim ", x.ndim(), ".");
      if (std::count(dims.begin(), dims.end(), d) > 1)
        fail<TypeError>("rev dimensions must be unique, got ", param_value_str(dims), ".");
    }
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    const Tensor& x = in[0];
    if (x.size() == 0) return as_tensors(x);
    Strides st = x.strides();
    int64_t offset = 0;
    for (int64_t d : params.get<IntList>("dimensions")) {
      offset += (x.shape()[d] - 1) * st[d];
      st[d] = -st[d];
    }
    return as_tensors(x.view(x.shape(), st, offset));
  };
  register_primitive(std::move(p));
}

// copy_p: forces a fresh buffer (e.g. jnp.array(x, copy=True)).
void copy() {
  Primitive p;
  p.name = "copy";
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = false;  // moves values as they are
  p.batch = batch_elementwise;
  p.vjp = [](const VjpArgs& a) { return Cotangents{*a.ct[0]}; };
  p.ur_rule = keep_operand_ur();  // the same partial sums, in a fresh buffer
  p.abstract_eval = [](const Avals& in, const Params&) {
    return Avals{like(in[0], in[0].shape, in[0].dtype, in[0].weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) {
    Tensor result = Tensor::empty(in[0].dtype(), in[0].shape());
    copy_into(in[0], result);
    return as_tensors(std::move(result));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_structural_primitives() {
  broadcast_in_dim();
  reshape();
  transpose();
  squeeze();
  rev();
  register_resizing_primitives();  // structural_resizing.cpp: slice, concatenate, stack, unstack, pad
  copy();
}

}  // namespace meshsim
