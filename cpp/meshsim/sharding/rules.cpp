#include "meshsim/sharding/rules.h"

#include <algorithm>
#include <map>
#include <set>

namespace meshsim {

// ---- spellings and spec helpers ----------------------------------------------

std::string py_entry(const AxisNames& e) {
  if (e.empty()) return "None";
  if (e.size() == 1) return "'" + e[0] + "'";
  std::string s = "(";
  for (size_t i = 0; i < e.size(); ++i) s += (i ? ", '" : "'") + e[i] + "'";
  return s + ")";
}

std::string py_spec_tuple(const Spec& spec) {
  std::string s = "(";
  for (size_t i = 0; i < spec.size(); ++i) s += (i ? ", " : "") + py_entry(spec[i]);
  return s + (spec.size() == 1 ? ",)" : ")");
}

std::string spec_repr(const Spec& spec) {
  std::string s = "P(";
  for (size_t i = 0; i < spec.size(); ++i) s += (i ? ", " : "") + py_entry(spec[i]);
  return s + (spec.size() == 1 ? ",)" : ")");
}

std::string abstract_mesh_repr(const Mesh& mesh) {
  std::string s = "AbstractMesh(";
  std::string types;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    s += (i ? ", '" : "'") + mesh.axis_names[i] + "': " + std::to_string(mesh.axis_sizes[i]);
    types += (i ? ", " : "") + std::string(axis_type_name(mesh.axis_types[i]));
  }
  if (mesh.axis_names.size() == 1) types += ",";
  return s + ", axis_types=(" + types + "), device_kind=cpu, num_cores=None, platform=cpu)";
}

std::string type_sharding_repr(const Aval& a) {
  if (!a.mesh) return "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=" +
                      spec_repr(pad_spec({}, a.shape.size())) + ")";
  return "NamedSharding(mesh=" + abstract_mesh_repr(*a.mesh) +
         ", spec=" + spec_repr(pad_spec(a.spec, a.shape.size())) + ")";
}

Spec pad_spec(Spec spec, size_t ndim) {
  spec.resize(std::max(ndim, spec.size()));
  return spec;
}

std::optional<Spec> spec_param(const Params& params, const std::string& name) {
  if (params.is_none(name)) return std::nullopt;
  for (const auto& [k, v] : params.items()) {
    if (k != name) continue;
    if (auto* s = std::get_if<std::vector<StrList>>(&v)) return *s;
    if (auto* l = std::get_if<IntList>(&v); l && l->empty()) return Spec{};
    if (auto* l = std::get_if<IntLists>(&v)) return Spec(l->size());
  }
  fail<TypeError>("parameter '", name, "' must be a partition spec");
}

bool is_replicated(const Spec& spec) {
  return std::all_of(spec.begin(), spec.end(), [](const AxisNames& e) { return e.empty(); });
}

bool same_abstract_mesh(const Mesh& a, const Mesh& b) {
  return &a == &b || (a.axis_names == b.axis_names && a.axis_sizes == b.axis_sizes &&
                      a.axis_types == b.axis_types);
}

bool same_devices(const Mesh& a, const Mesh& b) {
  return &a == &b || (a.axis_names == b.axis_names && a.axis_sizes == b.axis_sizes &&
                      a.device_ids == b.device_ids);
}

Spec explicit_part(const Spec& spec, const Mesh& mesh, size_t ndim) {
  Spec out(ndim);
  for (size_t d = 0; d < spec.size() && d < ndim; ++d)
    for (const auto& a : spec[d])
      if (mesh.is_explicit(a)) out[d].push_back(a);
  return out;
}

namespace {

int64_t entry_size(const Mesh& mesh, const AxisNames& e) {
  int64_t n = 1;
  for (const auto& a : e) n *= mesh.axis_size(a);
  return n;
}

std::string avals_short(const Avals& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i].str_short(true);
  return s;
}

[[noreturn]] void not_implemented(const std::string& name) {
  fail<ShardingTypeError>("sharding rule for ", name, " is not implemented. Please file an issue at "
                          "https://github.com/jax-ml/jax/issues. You can work around this error by "
                          "dropping that operation into full auto sharding mode via: "
                          "`jax.sharding.auto_axes(fun, out_shardings=...)`");
}

Spec spec_of(const Aval& a) { return pad_spec(a.spec, a.shape.size()); }

// ---- elementwise: JAX's broadcasting_sharding_rule -----------------------------

Spec broadcasting_rule(const std::string& name, const Avals& in) {
  std::vector<const Aval*> ranked;
  for (const Aval& a : in)
    if (a.ndim() > 0) ranked.push_back(&a);
  if (ranked.empty()) return {};
  const size_t ndim = ranked[0]->shape.size();
  for (const Aval* a : ranked)
    if (a->shape.size() != ndim) {
      std::string shapes;
      for (size_t i = 0; i < ranked.size(); ++i) shapes += (i ? ", " : "") + shape_str(ranked[i]->shape);
      fail<TypeError>(name, ": arrays must have same number of dimensions, got ", shapes, ".");
    }
  std::vector<Spec> specs;
  for (const Aval* a : ranked) specs.push_back(spec_of(*a));
  Spec out(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    const AxisNames& first = specs[0][d];
    bool all_same = true;
    for (const Spec& s : specs) all_same &= s[d] == first;
    if (all_same) {
      out[d] = first;
      continue;
    }
    // None on a size-1 dimension does not take part.
    std::vector<AxisNames> nontrivial;
    for (size_t i = 0; i < ranked.size(); ++i)
      if (!(ranked[i]->shape[d] == 1 && specs[i][d].empty())) nontrivial.push_back(specs[i][d]);
    if (nontrivial.empty()) continue;
    if (std::all_of(nontrivial.begin(), nontrivial.end(),
                    [&](const AxisNames& e) { return e == nontrivial[0]; })) {
      out[d] = nontrivial[0];
      continue;
    }
    for (const Spec& spec : specs) {
      const AxisNames& s = spec[d];
      if (out[d].empty() && !s.empty()) {
        out[d] = s;
      } else if (!out[d].empty() && !s.empty() && out[d] != s) {
        std::string all;
        for (size_t i = 0; i < specs.size(); ++i) all += (i ? ", " : "") + py_spec_tuple(specs[i]);
        fail<ShardingTypeError>(name, " got incompatible shardings for broadcasting: ", all, ".");
      }
    }
  }
  return out;
}

std::vector<Spec> elementwise_rule(const Primitive& prim, const Avals& in, const Avals& out) {
  for (const Aval& a : in)
    if (a.ndim() > 0 && a.shape != out[0].shape) not_implemented(prim.name);
  for (const Aval& o : out)
    if (o.shape != out[0].shape) not_implemented(prim.name);
  return std::vector<Spec>(out.size(), pad_spec(broadcasting_rule(prim.name, in), out[0].shape.size()));
}

// Elementwise on local blocks: every operand laid out as the result (a
// replicated operand is sliced, which moves nothing).
LocalPlan elementwise_plan(const Avals& in, const Params& params, const Avals& out) {
  LocalPlan plan;
  for (const Aval& a : in) plan.in_specs.push_back(a.ndim() > 0 ? spec_of(out[0]) : Spec{});
  plan.params = params;
  for (const Aval& o : out) plan.out_specs.push_back(spec_of(o));
  return plan;
}

// ---- dot_general ----------------------------------------------------------------

struct Dims {
  IntList lc, rc, lb, rb, lf, rf;
};

IntList free_of(int64_t ndim, const IntList& a, const IntList& b) {
  IntList f;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      f.push_back(d);
  return f;
}

Dims dot_dims(const Params& p, const Aval& l, const Aval& r) {
  const IntLists& dn = p.get<IntLists>("dimension_numbers");
  Dims d{dn[0], dn[1], dn[2], dn[3], {}, {}};
  d.lf = free_of(l.ndim(), d.lc, d.lb);
  d.rf = free_of(r.ndim(), d.rc, d.rb);
  return d;
}

Spec pick(const Spec& s, const IntList& dims) {
  Spec out;
  for (int64_t d : dims) out.push_back(s[d]);
  return out;
}

std::optional<Spec> out_sharding_param(const Params& p, size_t ndim) {
  if (auto s = spec_param(p, "out_sharding")) return pad_spec(*s, ndim);
  return std::nullopt;
}

void check_specs_match(const Spec& a, const Spec& b, const std::string& msg) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (!a[i].empty() && !b[i].empty() && a[i] != b[i]) fail<ShardingTypeError>(msg);
}

std::vector<Spec> dot_general_rule(const Avals& in, const Params& p, const Avals& out) {
  const Aval &l = in[0], &r = in[1];
  if (l.mesh && r.mesh && !same_abstract_mesh(*l.mesh, *r.mesh))
    fail<ShardingTypeError>("Mesh of both lhs and rhs should match. Got lhs: ",
                            abstract_mesh_repr(*l.mesh), " and rhs: ", abstract_mesh_repr(*r.mesh));
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const Dims d = dot_dims(p, l, r);
  const Spec ls = spec_of(l), rs = spec_of(r);
  const Spec lcs = pick(ls, d.lc), rcs = pick(rs, d.rc), lbs = pick(ls, d.lb), rbs = pick(rs, d.rb);
  check_specs_match(lbs, rbs, "dot_general requires lhs batch dimensions and rhs batch dimensions "
                              "to have the consistent sharding, got " + py_spec_tuple(lbs) + " and " +
                              py_spec_tuple(rbs) + ".");
  check_specs_match(lcs, rcs, "dot_general requires contracting dimensions to have consistent "
                              "sharding, got " + py_spec_tuple(lcs) + " and " + py_spec_tuple(rcs) + ".");
  for (size_t i = 0; i < lcs.size(); ++i)
    if (!lcs[i].empty() && !rcs[i].empty())
      fail<ShardingTypeError>("Contracting dimensions are sharded and it is ambiguous how the output "
                              "should be sharded. Please specify the output sharding via the "
                              "`out_sharding` parameter. Got lhs_contracting_spec=", py_spec_tuple(lcs),
                              " and rhs_contracting_spec=", py_spec_tuple(rcs));
  Spec o = lbs;
  for (int64_t f : d.lf) o.push_back(ls[f]);
  for (int64_t f : d.rf) o.push_back(rs[f]);
  return {o};
}

// Each device multiplies its blocks: a contracting dimension sharded on one
// side only is all-gathered there (FSDP); sharded alike on both sides it
// yields partial sums, all-reduced; the result is then resharded to the type.
std::optional<LocalPlan> dot_general_plan(const Avals& in, const Params& p, const Avals&) {
  const Dims d = dot_dims(p, in[0], in[1]);
  Spec ls = spec_of(in[0]), rs = spec_of(in[1]);
  LocalPlan plan;
  for (size_t i = 0; i < d.lc.size(); ++i) {
    AxisNames &l = ls[d.lc[i]], &r = rs[d.rc[i]];
    if (!l.empty() && l == r) {
      plan.reduce_axes.insert(plan.reduce_axes.end(), l.begin(), l.end());
    } else {
      l.clear();
      r.clear();
    }
  }
  for (size_t i = 0; i < d.lb.size(); ++i) rs[d.rb[i]] = ls[d.lb[i]];
  std::set<std::string> used(plan.reduce_axes.begin(), plan.reduce_axes.end());
  Spec o;
  for (int64_t b : d.lb) o.push_back(ls[b]);
  for (int64_t f : d.lf) o.push_back(ls[f]);
  for (const auto& e : o) used.insert(e.begin(), e.end());
  for (int64_t f : d.rf) {
    bool clash = false;
    for (const auto& a : rs[f]) clash |= used.count(a) > 0;
    if (clash) rs[f].clear();  // an axis cannot shard two result dimensions: gather this one
    for (const auto& a : rs[f]) used.insert(a);
    o.push_back(rs[f]);
  }
  plan.in_specs = {ls, rs};
  plan.params = p;
  plan.out_specs = {o};
  return plan;
}

// ---- reductions ---------------------------------------------------------------

bool in_list(const IntList& l, int64_t d) { return std::find(l.begin(), l.end(), d) != l.end(); }

Spec drop_dims(const Spec& s, const IntList& dims) {
  Spec out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!in_list(dims, static_cast<int64_t>(d))) out.push_back(s[d]);
  return out;
}

std::vector<Spec> reduce_rule(const Avals& in, const Params& p, const Avals&) {
  return {drop_dims(spec_of(in[0]), p.get<IntList>("axes"))};
}

// Reducing a sharded dimension: each device reduces its block, then the
// partial results are all-reduced across the dimension's mesh axes (`op`
// empty: not associative here, so the dimension is all-gathered first).
std::function<std::optional<LocalPlan>(const Avals&, const Params&, const Avals&)> reduce_plan(
    std::string op) {
  return [op](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    const IntList& axes = p.get<IntList>("axes");
    Spec s = spec_of(in[0]);
    LocalPlan plan;
    for (int64_t a : axes) {
      if (op.empty()) s[a].clear();
      else plan.reduce_axes.insert(plan.reduce_axes.end(), s[a].begin(), s[a].end());
    }
    plan.reduce_op = op.empty() ? "sum" : op;
    plan.in_specs = {s};
    plan.params = p;
    plan.out_specs = {spec_of(out[0])};
    return plan;
  };
}

// Operand dimensions that must be whole on each device (gathered if sharded).
std::optional<LocalPlan> gather_dims_plan(const Avals& in, const Params& p, const Avals& out,
                                          const IntList& dims) {
  LocalPlan plan;
  for (const Aval& a : in) {
    Spec s = spec_of(a);
    for (int64_t d : dims)
      if (d < static_cast<int64_t>(s.size())) s[d].clear();
    plan.in_specs.push_back(s);
  }
  plan.params = p;
  for (const Aval& o : out) plan.out_specs.push_back(spec_of(o));
  return plan;
}

// ---- structural ---------------------------------------------------------------

std::vector<Spec> transpose_rule(const Avals& in, const Params& p, const Avals&) {
  const Spec s = spec_of(in[0]);
  Spec o;
  for (int64_t d : p.get<IntList>("permutation")) o.push_back(s[d]);
  return {o};
}

std::vector<Spec> broadcast_in_dim_rule(const Avals& in, const Params& p, const Avals& out) {
  const Spec s = spec_of(in[0]);
  const IntList& dims = p.get<IntList>("broadcast_dimensions");
  Spec o(out[0].shape.size());
  for (size_t i = 0; i < dims.size(); ++i) o[dims[i]] = s[i];
  return {o};
}

// Params naming a result shape get the local block's shape.
std::function<std::optional<LocalPlan>(const Avals&, const Params&, const Avals&)> local_shape_plan(
    const std::string& shape_param) {
  return [shape_param](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    LocalPlan plan = elementwise_plan({}, p, out);
    for (const Aval& a : in) plan.in_specs.push_back(spec_of(a));
    Sharding s;
    s.mesh = out[0].mesh;
    s.spec = spec_of(out[0]);
    plan.params.set(shape_param, IntList(s.local_shape(out[0].shape)));
    return plan;
  };
}

std::vector<Spec> squeeze_rule(const Avals& in, const Params& p, const Avals&) {
  return {drop_dims(spec_of(in[0]), p.get<IntList>("dimensions"))};
}

// JAX's _get_sharding_for_varying_out_shape (slicing, padding, dynamic_slice).
std::vector<Spec> varying_shape_rule(const std::string& what, const Aval& x, const Shape& out) {
  const Spec s = spec_of(x);
  for (size_t d = 0; d < s.size(); ++d) {
    if (x.shape[d] == out[d] || s[d].empty()) continue;
    const int64_t n = entry_size(*x.mesh, s[d]);
    if (out[d] % n != 0) {
      std::string shape = "(";
      for (size_t i = 0; i < out.size(); ++i) shape += (i ? ", " : "") + std::to_string(out[i]);
      shape += out.size() == 1 ? ",)" : ")";
      const std::string entry = s[d].size() == 1 ? s[d][0] : py_entry(s[d]);
      fail<ShardingTypeError>(what, " on sharded dims where out dim (", out[d], ") is not divisible "
                              "by mesh axes (", n, ") with spec (", entry, ") is not "
                              "implemented. Got input type=", x.str_short(true),
                              " and output shape=", shape);
    }
  }
  return {s};
}

// A dimension kept whole by an op is local on each device's block.
bool sharded_dims_whole(const Aval& x, const Shape& out) {
  const Spec s = spec_of(x);
  for (size_t d = 0; d < s.size(); ++d)
    if (!s[d].empty() && x.shape[d] != out[d]) return false;
  return true;
}

// ---- reshape: JAX's split/merge rules ---------------------------------------------

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

// A reshape is local when every device's block is a contiguous run of the
// row-major order that the result's block is too: always for JAX's split
// rule; for a merge, when only the first dimension of each merged group is
// sharded. With `out_sharding`, the result is made so where the operand's
// type gives one, then resharded as asked (run_local's final reshard).
std::optional<LocalPlan> reshape_plan(const Avals& in, const Params& p_in, const Avals& out_in) {
  const Aval& x = in[0];
  Params p = p_in;
  Avals out = out_in;
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
  if (new_sizes.size() < x.shape.size()) {
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
      if (x.shape[k] % entry_size(*x.mesh, o[d]) != 0) return std::nullopt;
      in_spec[k] = o[d];
      for (size_t m = 1; m < g.parts.size(); ++m) in_spec[k + m].clear();
      k += g.parts.size();
    }
  }
  std::optional<LocalPlan> plan = local_shape_plan("new_sizes")(in, p, out);
  plan->in_specs[0] = in_spec;
  return plan;
}

// ---- others ---------------------------------------------------------------------

std::vector<Spec> same_as_operand(const Avals& in, const Params&, const Avals& out) {
  return std::vector<Spec>(out.size(), spec_of(in[0]));
}

std::string sharding_list(const Avals& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + type_sharding_repr(in[i]);
  return s;
}

std::vector<Spec> concatenate_rule(const Avals& in, const Params&, const Avals&) {
  const Aval* first = nullptr;
  for (const Aval& a : in) {
    if (!a.mesh) continue;
    if (!first) first = &a;
    else if (!same_abstract_mesh(*a.mesh, *first->mesh) || spec_of(a) != spec_of(*first))
      fail<ShardingTypeError>("All operands should have the same sharding. Got shardings ", sharding_list(in));
  }
  return {spec_of(*first)};
}

std::vector<Spec> select_n_rule(const Avals& in, const Params&, const Avals&) {
  const Avals cases(in.begin() + 1, in.end());
  const Aval* first = nullptr;
  for (const Aval& c : cases) {
    if (!c.mesh) continue;
    if (!first) first = &c;
    else if (spec_of(c) != spec_of(*first))
      fail<ShardingTypeError>("select cases must have the same shardings, got [", sharding_list(cases), "].");
  }
  if (!first) return {spec_of(in[1])};
  if (in[0].ndim() > 0 && in[0].mesh && spec_of(in[0]) != spec_of(*first))
    fail<ShardingTypeError>("select `which` must be scalar or have the same sharding as cases, got "
                            "`which` sharding ", type_sharding_repr(in[0]), " but case sharding ",
                            type_sharding_repr(in[1]), ".");
  return {spec_of(*first)};
}

std::vector<Spec> clamp_rule(const Avals& in, const Params&, const Avals&) { return {spec_of(in[1])}; }

std::function<std::vector<Spec>(const Avals&, const Params&, const Avals&)> unsharded_dim_rule(
    std::string param, bool sort) {
  return [param, sort](const Avals& in, const Params& p, const Avals& out) {
    const int64_t dim = p.get<int64_t>(param);
    for (const Aval& a : in) {
      if (!a.mesh || dim >= static_cast<int64_t>(spec_of(a).size()) || spec_of(a)[dim].empty()) continue;
      if (sort)
        fail<ShardingTypeError>("Arguments to sort must be unsharded over the sorting dimension. Got "
                                "arg sharding=", type_sharding_repr(a), " and sorting dimension=", dim);
      fail<ShardingTypeError>("Input should be unsharded over the axis being reduced. Got input type=",
                              a.str_short(), " and axis=", dim);
    }
    return std::vector<Spec>(out.size(), spec_of(in[0]));
  };
}

// ---- indexing: gather, scatter, dynamic_update_slice, top_k -----------------------

// JAX's str_short(mesh_axis_types=True): float32[8@dp,8]({Explicit: ('dp', 'tp')}).
std::string str_with_axis_types(const Aval& a, const Mesh& mesh) {
  std::vector<std::pair<AxisType, AxisNames>> groups;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == mesh.axis_types[i]; });
    if (it == groups.end()) groups.push_back({mesh.axis_types[i], {mesh.axis_names[i]}});
    else it->second.push_back(mesh.axis_names[i]);
  }
  std::string s = a.str_short() + "({";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += (i ? ", " : "") + std::string(axis_type_name(groups[i].first)) + ": (";
    const AxisNames& n = groups[i].second;
    for (size_t j = 0; j < n.size(); ++j) s += (j ? ", '" : "'") + n[j] + "'";
    s += (n.size() == 1 ? ",)" : ")");
  }
  return s + "})";
}

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
  plan.in_specs.push_back(xs);
  if (scatter) plan.in_specs.push_back(r);
  for (size_t i = first; i < in.size(); ++i) plan.in_specs.push_back(ispec);
  plan.params = p;
  plan.out_specs.push_back(scatter ? xs : r);
  return plan;
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

std::vector<Spec> top_k_rule(const Avals& in, const Params& p, const Avals& out) {
  const int64_t axis = p.get<int64_t>("axis");
  if (!spec_of(in[0])[axis].empty())
    fail<ShardingTypeError>("The input should be unsharded over the axis along which to compute the "
                            "top_k values. Got input type=", in[0].str_short(), " and axis=", axis);
  return std::vector<Spec>(out.size(), spec_of(in[0]));
}

using Rule = std::function<std::vector<Spec>(const Avals&, const Params&, const Avals&)>;
using Plan = std::function<std::optional<LocalPlan>(const Avals&, const Params&, const Avals&)>;

Plan elementwise_like() {
  return [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    return elementwise_plan(in, p, out);
  };
}

// The operand's own layout, the params unchanged: local when `whole` dims
// (or the checks of the rule) keep every sharded dimension whole.
Plan as_is_plan(std::function<bool(const Avals&, const Params&, const Avals&)> local) {
  return [local](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    if (local && !local(in, p, out)) return std::nullopt;
    LocalPlan plan;
    for (const Aval& a : in) plan.in_specs.push_back(spec_of(a));
    plan.params = p;
    for (const Aval& o : out) plan.out_specs.push_back(spec_of(o));
    return plan;
  };
}

}  // namespace

// ---- applying rules ---------------------------------------------------------------

void apply_sharding_rule(const Primitive& prim, const Avals& in, const Params& params, Avals& out) {
  if (prim.array_kernel) return;
  MeshPtr mesh;
  bool sharded = false, mixed = false;
  for (const Aval& a : in) {
    if (!a.mesh) continue;
    sharded |= !is_replicated(a.spec);
    if (mesh && !same_abstract_mesh(*mesh, *a.mesh)) mixed = true;
    if (!mesh) mesh = a.mesh;
  }
  if (mixed) {
    if (!sharded) mesh = nullptr;  // replicated values from different meshes: no common mesh
    else
      for (const Aval& a : in)
        if (a.mesh && !same_abstract_mesh(*mesh, *a.mesh))
          fail<ShardingTypeError>("Mesh for all inputs should be equal. Got one mesh: ",
                                  abstract_mesh_repr(*mesh), " and another mesh: ",
                                  abstract_mesh_repr(*a.mesh));
  }
  if (!mesh) {
    for (Aval& o : out) o.mesh = nullptr, o.spec.clear();
    return;
  }
  // Operands replicated (as JAX does under Auto meshes; JAX would also ask an
  // Explicit mesh for a rule here): the result is replicated too.
  if (!sharded && params.is_none("out_sharding")) {
    for (Aval& o : out) o.mesh = mesh, o.spec.assign(o.shape.size(), {});
    return;
  }
  std::vector<Spec> specs;
  if (prim.sharding_rule) specs = prim.sharding_rule(in, params, out);
  else if (prim.elementwise) specs = elementwise_rule(prim, in, out);
  else not_implemented(prim.name);
  for (size_t i = 0; i < out.size(); ++i) {
    Spec s = pad_spec(specs.at(i), out[i].shape.size());
    std::set<std::string> seen;
    for (const auto& e : s)
      for (const auto& a : e)
        if (!seen.insert(a).second) {
          Aval bad = out[i];
          bad.spec = s;
          bad.vma.clear();
          fail<ShardingTypeError>(prim.name, " operation with inputs: ", avals_short(in),
                                  " produces an illegally sharded result: ", bad.str_short(true));
        }
    out[i].mesh = mesh;
    out[i].spec = std::move(s);
  }
}

std::optional<LocalPlan> local_plan_for(const Primitive& prim, const Avals& in, const Params& params,
                                        const Avals& out) {
  if (prim.local_plan) return prim.local_plan(in, params, out);
  if (prim.elementwise && !prim.sharding_rule) {
    for (const Aval& a : in)
      if (a.ndim() > 0 && a.shape != out[0].shape) return std::nullopt;
    return elementwise_plan(in, params, out);
  }
  return std::nullopt;
}

void install_sharding_rules(std::map<std::string, Primitive>& table) {
  auto set = [&](const std::string& name, Rule rule, Plan plan) {
    auto it = table.find(name);
    if (it == table.end()) return;
    it->second.sharding_rule = std::move(rule);
    it->second.local_plan = std::move(plan);
  };
  // Elementwise-like primitives of other families.
  for (const char* name : {"copy", "stop_gradient", "threefry2x32", "name"}) {
    auto it = table.find(name);
    if (it != table.end() && !it->second.array_kernel) it->second.elementwise = true;
  }
  set("select_n", select_n_rule, elementwise_like());
  set("clamp", clamp_rule, elementwise_like());

  set("dot_general", dot_general_rule, dot_general_plan);

  set("reduce_sum", reduce_rule, reduce_plan("sum"));
  set("reduce_max", reduce_rule, reduce_plan("max"));
  set("reduce_min", reduce_rule, reduce_plan("min"));
  set("reduce_or", reduce_rule, reduce_plan("max"));
  set("reduce_and", reduce_rule, reduce_plan("min"));
  set("reduce_prod", reduce_rule, reduce_plan(""));
  set("reduce_xor", reduce_rule, reduce_plan(""));
  for (const char* name : {"argmax", "argmin"})
    set(name, reduce_rule, [](const Avals& in, const Params& p, const Avals& out) {
      return gather_dims_plan(in, p, out, p.get<IntList>("axes"));
    });
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
    set(name, unsharded_dim_rule("axis", false), as_is_plan(nullptr));
  set("sort", unsharded_dim_rule("dimension", true), as_is_plan(nullptr));

  set("transpose", transpose_rule, as_is_plan(nullptr));
  set("broadcast_in_dim", broadcast_in_dim_rule, local_shape_plan("shape"));
  set("reshape", reshape_rule, reshape_plan);
  set("squeeze", squeeze_rule, as_is_plan(nullptr));
  set("rev", same_as_operand, as_is_plan([](const Avals& in, const Params& p, const Avals&) {
        for (int64_t d : p.get<IntList>("dimensions"))
          if (!spec_of(in[0])[d].empty()) return false;
        return true;
      }));
  set("slice",
      [](const Avals& in, const Params&, const Avals& out) {
        return varying_shape_rule("slicing", in[0], out[0].shape);
      },
      [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
        const Spec s = spec_of(in[0]);
        const IntList& start = p.get<IntList>("start_indices");
        IntList limit = p.get<IntList>("limit_indices");
        const IntList strides = p.get_or<IntList>("strides", IntList(start.size(), 1));
        Sharding sh;
        sh.mesh = in[0].mesh;
        sh.spec = s;
        const Shape local = sh.local_shape(in[0].shape);
        for (size_t d = 0; d < s.size(); ++d) {
          if (s[d].empty()) continue;
          if (start[d] != 0 || limit[d] != in[0].shape[d] || strides[d] != 1) return std::nullopt;
          limit[d] = local[d];
        }
        LocalPlan plan = *as_is_plan(nullptr)(in, p, out);
        plan.params.set("limit_indices", limit);
        return plan;
      });
  set("pad",
      [](const Avals& in, const Params&, const Avals& out) {
        return varying_shape_rule("padding", in[0], out[0].shape);
      },
      as_is_plan([](const Avals& in, const Params&, const Avals& out) {
        return sharded_dims_whole(in[0], out[0].shape);
      }));
  set("dynamic_slice",
      [](const Avals& in, const Params&, const Avals& out) {
        return varying_shape_rule("dynamic_slice", in[0], out[0].shape);
      },
      [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
        if (!sharded_dims_whole(in[0], out[0].shape)) return std::nullopt;
        return local_shape_plan("slice_sizes")(in, p, out);
      });
  // The update is written where it lands: on the assembled value.
  set("dynamic_update_slice", dynamic_update_slice_rule, nullptr);
  // Indices point anywhere along the indexed dims, which the rules keep whole.
  set("gather", gather_rule, [](const Avals& in, const Params& p, const Avals& out) {
    return index_plan(in, p, out, false);
  });
  for (const char* name : {"scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"})
    set(name, scatter_rule, [](const Avals& in, const Params& p, const Avals& out) {
      return index_plan(in, p, out, true);
    });
  // The k largest along a whole (unsharded) dimension: each device's block.
  set("top_k", top_k_rule, as_is_plan(nullptr));
  set("concatenate", concatenate_rule, as_is_plan([](const Avals& in, const Params& p, const Avals&) {
        const int64_t d = p.get<int64_t>("dimension");
        for (const Aval& a : in)
          if (!spec_of(a)[d].empty()) return false;
        return true;
      }));
}

}  // namespace meshsim
