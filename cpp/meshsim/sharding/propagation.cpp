#include "meshsim/sharding/propagator.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "meshsim/core/sub_axes.h"

#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"

namespace meshsim {

std::optional<FactorMap> factors_of(const Primitive& prim, const Avals& in, const Params& params,
                                    const Avals& out) {
  if (prim.factors) return prim.factors(in, params, out);
  if (prim.elementwise) return elementwise_factors(in, out);
  return std::nullopt;
}

MeshPtr auto_mesh_of(const Program& program) {
  MeshPtr mesh;
  for (const Aval& a : program.avals) {
    if (!a.mesh || a.mesh->size() < 2) continue;
    if (mesh && !same_devices(*mesh, *a.mesh)) return nullptr;
    if (!mesh) mesh = a.mesh;
  }
  if (!mesh) return nullptr;
  for (AxisType t : mesh->axis_types)
    if (t == AxisType::Auto) return mesh;
  return nullptr;
}

}  // namespace meshsim

namespace meshsim::propagation {

Propagator::Propagator(const Program& program, const Mesh& mesh) : mesh_(mesh) {
  add_scope(program);
  // The pointers into each site's own map stay valid: sites_ no longer grows.
  for (Site& s : sites_) {
    s.dims.clear();
    for (auto& d : s.map.in) s.dims.push_back(&d);
    for (auto& d : s.map.out) s.dims.push_back(&d);
    if (s.vars.size() != s.dims.size()) s.dims.clear(), s.vars.clear();
  }
}

void Propagator::fix(int v, const Spec& spec) {
  spec_[v] = pad_spec(spec, avals_[v].shape.size());
  fixed_[v] = true;
}

void Propagator::run() {
  for (const bool pass_through_only : {true, false}) {
    for (int round = 0; round < 32; ++round) {
      bool changed = false;
      for (Site& s : sites_) changed |= apply(s, pass_through_only);
      for (auto it = sites_.rbegin(); it != sites_.rend(); ++it) changed |= apply(*it, pass_through_only);
      if (!changed) break;
    }
  }
}

bool Propagator::passes_through(const Site& s) {
  if (!s.eqn) return true;
  const Primitive& prim = *s.eqn->prim;
  return prim.elementwise || prim.name == "reshape" || prim.name == "transpose";
}

size_t Propagator::add_scope(const Program& program) {
  const size_t id = scopes_.size();
  const int offset = static_cast<int>(avals_.size());
  scopes_.push_back({&program, offset, {}, {}});
  for (const Aval& a : program.avals) {
    avals_.push_back(a);
    spec_.push_back(pad_spec(a.spec, a.shape.size()));
    fixed_.push_back(false);
    computed_.push_back(false);
  }
  for (int v : program.constvars) fix(offset + v, {});
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Equation& e = program.eqns[k];
    std::vector<int> in_vars, out_vars;
    Avals in, out;
    for (int v : e.inputs) in_vars.push_back(offset + v), in.push_back(program.avals[v]);
    for (int v : e.outputs) out_vars.push_back(offset + v), out.push_back(program.avals[v]);
    for (int v : e.outputs) computed_[offset + v] = true;
    std::optional<ControlFlowLinks> links;
    std::optional<FactorMap> map;
    try {
      links = sub_program_links(*e.prim, e.params);
      if (!links) map = factors_of(*e.prim, in, e.params, out);
    } catch (const std::exception&) {
      map.reset();
    }
    Site s{&e, map ? std::move(*map) : FactorMap{}, e.inputs.size(), in_vars, out_vars, {}, {}, {}, {}};
    if (map) add_permutation_factors(e, in, out, s);
    if (map) add_reshape_parts(e, in, out, s);
    s.permutation.resize(s.map.num_factors, false);
    if (map) {
      s.vars = in_vars;
      s.vars.insert(s.vars.end(), out_vars.begin(), out_vars.end());
    }
    scopes_[id].sites.push_back(sites_.size());
    sites_.push_back(std::move(s));
    fix_results(e, out_vars);
    if (links) add_call(id, k, std::move(*links), in_vars, out_vars);
  }
  fix_constrained_operands(program, offset);
  return id;
}

void Propagator::fix_constrained_operands(const Program& program, int offset) {
  std::vector<int> uses(program.avals.size(), 0);
  for (const Equation& e : program.eqns)
    for (int v : e.inputs) ++uses[v];
  for (int v : program.outvars) ++uses[v];
  for (const Equation& e : program.eqns) {
    if (!e.prim->result_is_operand_view || !e.prim->fixed_result_specs || e.inputs.size() != 1) continue;
    const int v = offset + e.inputs[0];
    if (uses[e.inputs[0]] != 1 || !computed_[v] || fixed_[v]) continue;
    const std::vector<Spec> specs = e.prim->fixed_result_specs(e.params);
    if (!specs.empty()) fix(v, specs[0]);
  }
}

ShardingPlan Propagator::plan_of(size_t id) const {
  const Scope& scope = scopes_[id];
  const Program& program = *scope.program;
  ShardingPlan p;
  p.value.assign(spec_.begin() + scope.offset, spec_.begin() + scope.offset + program.avals.size());
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Site& s = sites_[scope.sites[k]];
    std::vector<Spec> ops, computed;
    std::vector<SubProgramPlan> sub;
    const auto call = scope.calls.find(k);
    if (call != scope.calls.end()) {
      plan_call(s, call->second.first, call->second.second, ops, computed, sub);
    } else if (s.vars.empty()) {
      for (int v : s.in_vars) ops.push_back(spec_[v]);
    } else {
      std::vector<AxisNames> fs = resolve(s, /*planning=*/true);
      take_results_layouts(s, fs);
      pass_through_over_idle_axes(s, fs);
      auto operands = [&](bool permuted_split) {
        std::vector<Spec> specs;
        for (size_t i = 0; i < s.num_in; ++i) {
          const std::vector<int>& dims = *s.dims[i];
          Spec o(dims.size());
          for (size_t d = 0; d < dims.size(); ++d)
            if (dims[d] != kNoFactor && (permuted_split || !s.permutation[dims[d]])) o[d] = joined(s, i, d, fs);
          specs.push_back(std::move(o));
        }
        return specs;
      };
      ops = operands(false);
      const std::vector<Spec> split = operands(true);
      bool on_blocks = split != ops && runs_on_blocks(s, split, values(s.out_vars));
      if (on_blocks) ops = split;
      if (!on_blocks) {
        const std::vector<Spec> kept = kept_uneven(s, ops);
        on_blocks = kept != ops && runs_on_blocks(s, kept, values(s.out_vars));
        if (on_blocks) ops = kept;
      }
      if (!on_blocks) computed = computed_layouts(s);
      if (computed.empty() && !takes_operands(local_plan(s, ops, values(s.out_vars)), ops))
        computed = resolved_results(s, fs);
      if (!computed.empty() && s.eqn->prim->retiles_through_other_dim) retile_concatenated(s, ops, computed[0]);
    }
    p.operand.push_back(std::move(ops));
    p.computed.push_back(std::move(computed));
    p.sub.push_back(std::move(sub));
  }
  return p;
}

std::vector<Spec> Propagator::values(const std::vector<int>& vars) const {
  std::vector<Spec> specs;
  for (int v : vars) specs.push_back(spec_[v]);
  return specs;
}

std::optional<LocalPlan> Propagator::local_plan(const Site& s, const std::vector<Spec>& operands,
                                                const std::vector<Spec>& results) const {
  const Equation& e = *s.eqn;
  auto mesh = std::make_shared<Mesh>(mesh_);
  auto laid_out = [&](int v, const Spec& spec) {
    Aval a = avals_[v];
    a.mesh = mesh;
    a.spec = pad_spec(spec, a.shape.size());
    return a;
  };
  Avals in, out;
  for (size_t i = 0; i < s.in_vars.size(); ++i) in.push_back(laid_out(s.in_vars[i], operands[i]));
  for (size_t j = 0; j < s.out_vars.size(); ++j) out.push_back(laid_out(s.out_vars[j], results[j]));
  try {
    return local_plan_for(*e.prim, in, e.params, out);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool Propagator::takes_operands(const std::optional<LocalPlan>& lp, const std::vector<Spec>& operands) {
  if (!lp) return false;
  for (size_t i = 0; i < operands.size(); ++i)
    if (pad_spec(lp->in_specs[i], operands[i].size()) != operands[i]) return false;
  return true;
}

bool Propagator::runs_on_blocks(const Site& s, const std::vector<Spec>& operands,
                                const std::vector<Spec>& results) const {
  const std::optional<LocalPlan> lp = local_plan(s, operands, results);
  if (!takes_operands(lp, operands) || !lp->reduce_axes.empty()) return false;
  for (size_t j = 0; j < results.size(); ++j)
    if (pad_spec(lp->out_specs[j], results[j].size()) != results[j]) return false;
  return true;
}

void Propagator::fix_results(const Equation& e, const std::vector<int>& outputs) {
  if (!e.prim->fixed_result_specs) return;
  const std::vector<Spec> specs = e.prim->fixed_result_specs(e.params);
  for (size_t j = 0; j < outputs.size() && j < specs.size(); ++j) fix(outputs[j], specs[j]);
}

int64_t Propagator::entry_size(const AxisNames& axes) const {
  int64_t n = 1;
  for (const auto& a : axes) n *= mesh_.axis_size(a);
  return n;
}

std::vector<DimPart> Propagator::parts_of(const Site& s, size_t t, size_t d, const AxisNames& layout) const {
  const auto it = s.compound.find({t, d});
  if (it == s.compound.end()) return {{(*s.dims[t])[d], avals_[s.vars[t]].shape[d], layout}};
  const auto& [factors, sizes] = it->second;
  std::vector<AxisNames> axes = axes_of_parts(mesh_, layout, sizes);
  std::vector<DimPart> parts;
  for (size_t k = 0; k < factors.size(); ++k) parts.push_back({factors[k], sizes[k], std::move(axes[k])});
  return parts;
}

AxisNames Propagator::joined(const Site& s, size_t t, size_t d, const std::vector<AxisNames>& fs) const {
  const int f = (*s.dims[t])[d];
  const auto it = s.compound.find({t, d});
  if (it == s.compound.end()) return f == kNoFactor ? AxisNames{} : fs[f];
  const auto& [factors, sizes] = it->second;
  AxisNames axes;
  for (size_t k = 0; k < factors.size(); ++k) {
    axes.insert(axes.end(), fs[factors[k]].begin(), fs[factors[k]].end());
    if (entry_size(fs[factors[k]]) != sizes[k]) break;
  }
  return joined_sub_axes(mesh_, axes);
}

std::vector<AxisNames> Propagator::resolve(const Site& s, bool planning, bool results_only) const {
  const int nf = s.map.num_factors;
  std::vector<AxisNames> fs(nf);
  std::vector<int64_t> weight(nf, -1), size(nf, 0);
  std::vector<bool> in_result(nf, false);
  const size_t num_in = s.num_in;
  // The values' axes for each factor (unsharded ones say nothing): the
  // longest when all are prefixes of it, their common prefix otherwise.
  std::vector<bool> any(nf, false), from_operand(nf, false), split_in_result(nf, false);
  std::vector<std::vector<AxisNames>> candidates(nf);  // per factor: the operands' axes, in order
  // Per factor: whether the values' axes conflict (neither a prefix of the
  // other), and the first result's axes for it.
  std::vector<bool> conflicting(nf, false);
  std::vector<AxisNames> result_axes(nf);
  // Per factor: whether a result whose layout is fixed has it, and its axes there.
  std::vector<bool> in_fixed_result(nf, false);
  std::vector<AxisNames> fixed_result_axes(nf);
  for (size_t t = 0; t < s.vars.size(); ++t) {
    const std::vector<int>& dims = *s.dims[t];
    const int v = s.vars[t];
    const Aval& a = avals_[v];
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == kNoFactor) continue;
      for (const DimPart& part : parts_of(s, t, d, spec_[v][d])) {
        const int f = part.factor;
        // What divides every size the factor has (a pad's or slice's dim differs in its result).
        size[f] = std::gcd(size[f], part.size);
        in_result[f] = in_result[f] || t >= num_in;
        const AxisNames& axes = part.axes;
        if (t >= num_in && fixed_[v] && !in_fixed_result[f]) {
          in_fixed_result[f] = true;
          fixed_result_axes[f] = axes;
        }
        if (axes.empty()) continue;
        weight[f] = std::max(weight[f], elements(a));
        from_operand[f] = from_operand[f] || t < num_in;
        split_in_result[f] = split_in_result[f] || t >= num_in;
        if (t < num_in) candidates[f].push_back(axes);
        if (t >= num_in && result_axes[f].empty()) result_axes[f] = axes;
        if (!any[f]) {
          fs[f] = axes;
          any[f] = true;
        } else if (is_prefix(fs[f], axes)) {
          fs[f] = axes;
        } else if (!is_prefix(axes, fs[f])) {
          conflicting[f] = true;
          size_t k = 0;
          while (k < axes.size() && k < fs[f].size() && axes[k] == fs[f][k]) ++k;
          fs[f].resize(k);
        }
      }
    }
  }
  // For computing on, a factor whose values conflict is laid out as the
  // result has it: XLA's partitioner reshards the operands to the layout
  // propagation gave the result (a bias `P(('X', 'Y'))` broadcast into a
  // result split `P(None, 'Y')` is moved to `P('Y')`, not gathered whole).
  if (planning)
    for (int f = 0; f < nf; ++f)
      if (conflicting[f] && !result_axes[f].empty()) fs[f] = result_axes[f];
  // An operation passing every factor through computes in its result's
  // layout where that is fixed (a constrained value): XLA reshards the
  // operands to it.
  if (planning && passes_through(s))
    for (int f = 0; f < nf; ++f)
      if (in_fixed_result[f]) fs[f] = fixed_result_axes[f];
  // Each factor keeps the axes that divide its size; an axis shards one
  // factor only (the one of the largest value, then the first).
  std::vector<int> order(nf);
  for (int f = 0; f < nf; ++f) order[f] = f;
  // On equal weights, a factor the operands lay out so wins over one only a
  // result does (XLA partitions by the operands and reshards the result).
  // For computing on, a permutation factor the results leave whole comes
  // last: its operands' dims are gathered anyway, and XLA reshards them to
  // the results' layout of the other dims (a cumulative sum along a split
  // dim whose result is split along another).
  auto deferred = [&](int f) { return planning && s.permutation[f] && !split_in_result[f]; };
  // For computing on, on equal weights, a factor some operand holds in full
  // wins over one whose axes only a result extends: XLA keeps the operand's
  // split (a gather's indexed dim, its partial results all-reduced) and
  // slices the result to its layout after.
  std::vector<bool> held(nf, false);
  for (int f = 0; f < nf; ++f)
    for (const AxisNames& axes : candidates[f]) held[f] = held[f] || axes == fs[f];
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (deferred(a) != deferred(b)) return deferred(b);
    if (weight[a] != weight[b]) return weight[a] > weight[b];
    if (from_operand[a] != from_operand[b]) return static_cast<bool>(from_operand[a]);
    return planning && held[a] && !held[b];
  });
  const std::vector<AxisNames> wanted = fs;
  std::set<std::string> used;
  // Each factor in order keeps the axes no factor before it took; a
  // contracted factor in `whole` (computed whole, see below) takes none.
  auto assign = [&](const std::set<int>& whole) {
    used.clear();
    for (int f : order) {
      AxisNames kept;
      int64_t n = 1;
      for (const auto& a : whole.count(f) ? AxisNames{} : wanted[f]) {
        const int64_t k = mesh_.axis_size(a);
        if (overlaps_any(mesh_, used, a) || size[f] % (n * k) != 0) break;
        n *= k;
        kept.push_back(a);
      }
      used.insert(kept.begin(), kept.end());
      fs[f] = std::move(kept);
    }
  };
  assign({});
  // A contracted factor its operands split over different axes into as
  // many blocks takes the axes of the last such operand that other factors
  // leave free: XLA moves the other operands' blocks to them (a
  // collective-permute) rather than gathering them all.
  auto take_last_operands_axes = [&](const std::set<int>& whole) {
  for (int f = 0; f < nf; ++f) {
    if (in_result[f] || !fs[f].empty() || candidates[f].size() < 2 || whole.count(f)) continue;
    const int64_t blocks = entry_size(candidates[f][0]);
    bool alike = true;
    for (const AxisNames& axes : candidates[f]) alike = alike && entry_size(axes) == blocks;
    if (!alike || size[f] % blocks != 0) continue;
    for (auto it = candidates[f].rbegin(); it != candidates[f].rend(); ++it) {
      bool free = true;
      for (const std::string& a : *it) free = free && !used.count(a);
      if (!free) continue;
      fs[f] = *it;
      used.insert(it->begin(), it->end());
      break;
    }
  }
  };
  take_last_operands_axes({});
  if (results_only) {
    std::set<int> contracted;
    for (int f = 0; f < nf; ++f)
      if (!in_result[f]) contracted.insert(f);
    assign(contracted);
    return fs;
  }
  // A contracted factor computed whole (its operands gathered) leaves its
  // axes to the factors that wanted them after it, as XLA keeps a result
  // split as its operand is while gathering the other operand.
  std::set<int> whole;
  for (int f = 0; f < nf; ++f)
    if (!in_result[f] && !fs[f].empty() && contracted_layout(s, f, fs, planning).empty()) whole.insert(f);
  if (!whole.empty()) {
    assign(whole);
    take_last_operands_axes(whole);
  }
  for (int f = 0; f < nf; ++f)
    if (!in_result[f] && !fs[f].empty()) fs[f] = contracted_layout(s, f, fs, planning);
  if (planning)
    for (int f = 0; f < nf; ++f) {
      if (in_result[f] || candidates[f].empty()) continue;
      if (const std::optional<AxisNames> grouped = grouped_on_free_dims(s, f)) fs[f] = *grouped;
      else if (fs[f].empty()) fs[f] = split_over_idle_axes(s, f, fs, size[f]);
    }
  return fs;
}

void Propagator::take_results_layouts(const Site& s, std::vector<AxisNames>& fs) const {
  // Axes of factors no result has (contracted: a reduction's partial
  // results all-reduced) stay theirs; the result is sliced after.
  std::set<std::string> contracted;
  std::vector<bool> in_result(s.map.num_factors, false);
  for (size_t t = s.num_in; t < s.vars.size(); ++t)
    for (int f : *s.dims[t])
      if (f != kNoFactor) in_result[f] = true;
  for (int f = 0; f < s.map.num_factors; ++f)
    if (!in_result[f]) contracted.insert(fs[f].begin(), fs[f].end());
  std::set<int> taken;
  std::set<std::string> axes;
  for (size_t t = s.num_in; t < s.vars.size(); ++t) {
    const std::vector<int>& dims = *s.dims[t];
    const Spec& value = spec_[s.vars[t]];
    for (size_t d = 0; d < dims.size() && d < value.size(); ++d) {
      const int f = dims[d];
      if (f == kNoFactor || s.permutation[f] || s.compound.count({t, d}) || taken.count(f) || fs[f] == value[d])
        continue;
      if (std::any_of(value[d].begin(), value[d].end(),
                      [&](const std::string& a) { return overlaps_any(mesh_, contracted, a); }))
        continue;
      fs[f] = value[d];
      taken.insert(f);
      axes.insert(value[d].begin(), value[d].end());
    }
  }
  if (taken.empty()) return;
  for (int f = 0; f < s.map.num_factors; ++f) {
    if (taken.count(f)) continue;
    size_t k = 0;
    while (k < fs[f].size() && !overlaps_any(mesh_, axes, fs[f][k])) ++k;
    fs[f].resize(k);
  }
}

void Propagator::pass_through_over_idle_axes(const Site& s, std::vector<AxisNames>& fs) const {
  if (s.eqn->prim->name != "gather" || s.out_vars.size() != 1) return;
  std::vector<bool> in_result(s.map.num_factors, false);
  for (int f : *s.dims[s.num_in])
    if (f != kNoFactor) in_result[f] = true;
  bool partial = false;
  std::set<std::string> used;
  for (int f = 0; f < s.map.num_factors; ++f) {
    partial = partial || (!in_result[f] && !fs[f].empty());
    used.insert(fs[f].begin(), fs[f].end());
  }
  if (!partial) return;
  const int v = s.out_vars[0];
  const std::vector<int>& dims = *s.dims[s.num_in];
  for (size_t d = 0; d < dims.size(); ++d) {
    const int f = dims[d];
    if (f == kNoFactor || !fs[f].empty() || spec_[v][d].empty() || s.compound.count({s.num_in, d})) continue;
    // No more blocks than the result's layout has: a collective-permute
    // then moves each to its place.
    const int64_t blocks = entry_size(spec_[v][d]);
    AxisNames idle;
    int64_t n = 1;
    for (const std::string& a : mesh_.axis_names) {
      int64_t k = mesh_.axis_size(a);
      if (overlaps_any(mesh_, used, a) || k < 2) continue;
      std::string axis = a;
      if (n * k > blocks) {
        // An axis larger than the blocks left: its major sub-axis of that many.
        const int64_t part = blocks / n;
        if (part < 2 || k % part != 0) continue;
        axis = axis_part_name(mesh_, {a, 1, part});
        k = part;
      }
      if (avals_[v].shape[d] % (n * k) != 0) continue;
      idle.push_back(axis);
      n *= k;
    }
    if (idle.empty()) continue;
    fs[f] = idle;
    used.insert(idle.begin(), idle.end());
  }
}

std::vector<Spec> Propagator::resolved_results(const Site& s, const std::vector<AxisNames>& fs) const {
  std::vector<Spec> layouts;
  bool differs = false;
  for (size_t t = s.num_in; t < s.vars.size(); ++t) {
    Spec spec = spec_[s.vars[t]];
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size() && d < spec.size(); ++d) {
      if (dims[d] == kNoFactor) continue;
      const AxisNames axes = joined(s, t, d, fs);
      differs = differs || axes != spec[d];
      spec[d] = axes;
    }
    layouts.push_back(std::move(spec));
  }
  if (!differs) layouts.clear();
  return layouts;
}

bool Propagator::apply(const Site& s, bool pass_through_only) {
  if (s.vars.empty() || (pass_through_only && !passes_through(s))) return false;
  const std::vector<AxisNames> fs = resolve(s);
  // A dot's results take their factors' axes as Shardy gives a tensor its
  // own factors' axes: the contracted factor, which they do not have, does not compete.
  const bool dot = s.eqn && s.eqn->prim->name == "dot_general";
  const std::vector<AxisNames> fs_results = dot ? resolve(s, false, true) : fs;
  bool changed = false;
  for (size_t t = 0; t < s.vars.size(); ++t) {
    const int v = s.vars[t];
    if (fixed_[v]) continue;
    const std::vector<int>& dims = *s.dims[t];
    Spec& spec = spec_[v];
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == kNoFactor) continue;
      const AxisNames want = joined(s, t, d, t >= s.num_in ? fs_results : fs);
      if (want.size() <= spec[d].size() || !is_prefix(spec[d], want)) continue;
      std::set<std::string> elsewhere;
      for (size_t o = 0; o < spec.size(); ++o)
        if (o != d) elsewhere.insert(spec[o].begin(), spec[o].end());
      AxisNames grown = spec[d];
      for (size_t k = spec[d].size(); k < want.size(); ++k) {
        // Only Auto axes are chosen here; Explicit ones are the types'.
        if (overlaps_any(mesh_, elsewhere, want[k]) || mesh_.is_explicit(want[k])) break;
        grown.push_back(want[k]);
      }
      if (grown.size() > spec[d].size()) {
        spec[d] = std::move(grown);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace meshsim::propagation

namespace meshsim {

ShardingPlan propagate_shardings(const Program& program, const Mesh& mesh,
                                 const std::vector<std::optional<Spec>>& args,
                                 const std::vector<std::optional<Spec>>& results) {
  propagation::Propagator p(program, mesh);
  for (size_t i = 0; i < program.invars.size() && i < args.size(); ++i)
    p.fix(program.invars[i], args[i].value_or(Spec{}));
  for (size_t j = 0; j < program.outvars.size() && j < results.size(); ++j)
    if (results[j]) p.fix(program.outvars[j], *results[j]);
  p.run();
  return p.plan();
}

}  // namespace meshsim
