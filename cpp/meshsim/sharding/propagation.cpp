#include "meshsim/sharding/propagation.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

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

namespace {

bool is_prefix(const AxisNames& a, const AxisNames& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

int64_t elements(const Aval& a) { return num_elements(a.shape); }

// One equation seen by propagation: its factor map and, for each operand and
// result, the variable it is.
struct Site {
  const Equation* eqn;  // null: a link between a control-flow value and its sub-program's
  FactorMap map;
  size_t num_in;                            // operands (then results)
  std::vector<int> in_vars, out_vars;       // the equation's operands and results
  std::vector<int> vars;                    // operands, then results, when the map applies
  std::vector<const std::vector<int>*> dims;  // their factor per dimension
  std::vector<bool> permutation;            // per factor: see add_permutation_factors
  // Dims made of several factors, major first (see add_reshape_parts): per
  // (place among operands then results, dim), the factors and their sizes.
  std::map<std::pair<size_t, size_t>, std::pair<std::vector<int>, std::vector<int64_t>>> compound;
};

// Shardy's reshape rule: a dim that a reshape splits into several (or merges
// from several) is made of one factor per part, major first, so each part
// takes the axes of the whole dim that fall to it (`(4,)` over ('Y', 'Z')
// split to `(2, 2)` is ('Y', 'Z') on the parts, a local reshape). The factor
// map links the whole dim with its group's first part; the later parts get
// factors of their own here. For primitives that regroup dims (Primitive::regroups_dims).
void add_reshape_parts(const Equation& e, const Avals& in, const Avals& out, Site& s) {
  if (!e.prim->regroups_dims || in.size() != 1 || out.size() != 1) return;
  const Shape &a = in[0].shape, &b = out[0].shape;
  std::vector<int>&ma = s.map.in[0], &mb = s.map.out[0];
  for (size_t i = 0; i < a.size(); ++i) {
    if (ma[i] == kNoFactor) continue;
    const size_t j = std::find(mb.begin(), mb.end(), ma[i]) - mb.begin();
    if (j == mb.size() || a[i] == b[j]) continue;
    // The one dim on one side, its parts on the other.
    const bool split = a[i] > b[j];
    const Shape& parts_shape = split ? b : a;
    std::vector<int>& parts_map = split ? mb : ma;
    const size_t whole = split ? i : j, first = split ? j : i;
    const int64_t total = split ? a[i] : b[j];
    std::vector<int> factors;
    std::vector<int64_t> sizes;
    int64_t product = 1;
    for (size_t k = first; k < parts_shape.size() && product < total; ++k) {
      product *= parts_shape[k];
      if (parts_shape[k] == 1) continue;
      if (k != first) {
        if (parts_map[k] != kNoFactor) return;
        parts_map[k] = s.map.num_factors++;
      }
      factors.push_back(parts_map[k]);
      sizes.push_back(parts_shape[k]);
    }
    if (product != total) return;
    s.compound[{split ? 0 : 1, whole}] = {std::move(factors), std::move(sizes)};
  }
}

// Shardy's permutation factors: a dimension that concatenate or slice changes
// in size keeps its sharding from operand to result, but the operation
// needs it whole in the operands (gathered), and its result is sliced
// locally to the propagated layout, as XLA partitions a concatenate; unless
// the primitive's local plan runs on the blocks laid out so (a slice whose
// result blocks lie within the devices' own operand blocks). For primitives
// declaring it (Primitive::unmapped_dims_keep_sharding).
void add_permutation_factors(const Equation& e, const Avals& in, const Avals& out, Site& s) {
  s.permutation.assign(s.map.num_factors, false);
  if (!e.prim->unmapped_dims_keep_sharding || out.size() != 1) return;
  const size_t rank = out[0].shape.size();
  for (size_t d = 0; d < rank; ++d) {
    if (s.map.out[0][d] != kNoFactor) continue;
    // Scalar operands (a pad's padding value) have no dims to align.
    bool aligned = true;
    for (size_t i = 0; i < in.size(); ++i)
      aligned &= in[i].shape.empty() || (in[i].shape.size() == rank && s.map.in[i][d] == kNoFactor);
    if (!aligned) continue;
    const int f = s.map.num_factors++;
    s.permutation.push_back(true);
    s.map.out[0][d] = f;
    for (size_t i = 0; i < in.size(); ++i)
      if (!in[i].shape.empty()) s.map.in[i][d] = f;
  }
}

class Propagator {
 public:
  // Control-flow equations' sub-programs join the one propagation (Shardy
  // propagates through a while's body and a conditional's branches): their
  // values get ids after the program's, and link sites tie each to the
  // operand or result it is.
  Propagator(const Program& program, const Mesh& mesh) : mesh_(mesh) {
    add_scope(program);
    // The pointers into each site's own map stay valid: sites_ no longer grows.
    for (Site& s : sites_) {
      s.dims.clear();
      for (auto& d : s.map.in) s.dims.push_back(&d);
      for (auto& d : s.map.out) s.dims.push_back(&d);
      if (s.vars.size() != s.dims.size()) s.dims.clear(), s.vars.clear();
    }
  }

  void fix(int v, const Spec& spec) {
    spec_[v] = pad_spec(spec, avals_[v].shape.size());
    fixed_[v] = true;
  }

  // Shardy's op-priority propagation: first only through the operations
  // that pass every factor through (elementwise ones, reshapes, transposes
  // and the edges between a call and its sub-programs), to a fixed point;
  // then through every operation. (Shardy's middle stage, every operation's
  // pass-through factors, is not modelled: docs/auto_sharding.md.)
  void run() {
    for (const bool pass_through_only : {true, false}) {
      for (int round = 0; round < 32; ++round) {
        bool changed = false;
        for (Site& s : sites_) changed |= apply(s, pass_through_only);
        for (auto it = sites_.rbegin(); it != sites_.rend(); ++it) changed |= apply(*it, pass_through_only);
        if (!changed) break;
      }
    }
  }

  static bool passes_through(const Site& s) {
    if (!s.eqn) return true;
    const Primitive& prim = *s.eqn->prim;
    return prim.elementwise || prim.name == "reshape" || prim.name == "transpose";
  }

  ShardingPlan plan() const { return plan_of(0); }

 private:
  // One program among those propagated together: its values are ids
  // [offset, offset + its avals).
  struct Scope {
    const Program* program;
    int offset;
    std::vector<size_t> sites;  // per equation
    // Per control-flow equation: how it calls its sub-programs, and their scopes.
    std::map<size_t, std::pair<ControlFlowLinks, std::vector<size_t>>> calls;
  };

  size_t add_scope(const Program& program) {
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
    return id;
  }

  // The sub-programs of equation `k` of scope `id` join the propagation, each
  // of their inputs and outputs linked to the operand or result it is.
  void add_call(size_t id, size_t k, ControlFlowLinks links, const std::vector<int>& in_vars,
                const std::vector<int>& out_vars) {
    std::vector<size_t> scopes;
    for (const SubProgramLinks& l : links.programs) {
      const size_t sub = add_scope(*l.program);
      scopes.push_back(sub);
      const Program& p = *l.program;
      const int offset = scopes_[sub].offset;
      for (size_t i = 0; i < p.invars.size() && i < l.in_operand.size(); ++i) {
        const int o = l.in_operand[i], r = l.in_result[i];
        if (o >= 0) add_link(in_vars[o], offset + p.invars[i], static_cast<size_t>(o) >= links.stacked_operands);
        if (r >= 0) add_link(out_vars[r], offset + p.invars[i], static_cast<size_t>(r) >= links.stacked_results);
      }
      for (size_t j = 0; j < p.outvars.size() && j < l.out_result.size(); ++j) {
        const int r = l.out_result[j];
        if (r >= 0) add_link(offset + p.outvars[j], out_vars[r], false, static_cast<size_t>(r) >= links.stacked_results);
      }
    }
    scopes_[id].calls[k] = {std::move(links), std::move(scopes)};
  }

  // A site tying value `a` to value `b` dim by dim; a stacked one has a
  // leading dim more, which the other does not have.
  void add_link(int a, int b, bool a_stacked, bool b_stacked = false) {
    const size_t ra = avals_[a].shape.size() - (a_stacked ? 1 : 0);
    const size_t rb = avals_[b].shape.size() - (b_stacked ? 1 : 0);
    if (ra != rb) return;
    auto dims = [&](bool stacked) {
      std::vector<int> d(stacked ? 1 : 0, kNoFactor);
      for (size_t i = 0; i < ra; ++i) d.push_back(static_cast<int>(i));
      return d;
    };
    Site s{nullptr, FactorMap{}, 1, {a}, {b}, {a, b}, {}, {}, {}};
    s.map.num_factors = static_cast<int>(ra);
    s.map.in = {dims(a_stacked)};
    s.map.out = {dims(b_stacked)};
    s.permutation.assign(ra, false);
    sites_.push_back(std::move(s));
  }

  // The plan of scope `id`'s program.
  ShardingPlan plan_of(size_t id) const {
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
        const std::vector<AxisNames> fs = resolve(s, /*planning=*/true);
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
        if (!computed.empty() && s.eqn->prim->retiles_through_other_dim) retile_concatenated(s, ops, computed[0]);
      }
      p.operand.push_back(std::move(ops));
      p.computed.push_back(std::move(computed));
      p.sub.push_back(std::move(sub));
    }
    return p;
  }

  std::vector<Spec> values(const std::vector<int>& vars) const {
    std::vector<Spec> specs;
    for (int v : vars) specs.push_back(spec_[v]);
    return specs;
  }

  // A control-flow equation: its operands are used laid out as the
  // sub-programs' inputs they become (a carry as the body's input, which
  // the body's result is brought back to on every iteration); its results
  // come out as the carries or the sub-programs' outputs. When its local
  // plan takes them so, it runs as one primitive on each device's blocks;
  // otherwise its sub-programs run partitioned (`sub`).
  void plan_call(const Site& s, const ControlFlowLinks& links, const std::vector<size_t>& scopes,
                 std::vector<Spec>& ops, std::vector<Spec>& made, std::vector<SubProgramPlan>& sub) const {
    auto stack = [](Spec spec) {
      spec.insert(spec.begin(), AxisNames{});
      return spec;
    };
    auto unstack = [](Spec spec, bool stacked) {
      if (stacked && !spec.empty()) spec.erase(spec.begin());
      return spec;
    };
    ops = values(s.in_vars);
    made = values(s.out_vars);
    std::vector<int> carried(s.out_vars.size(), -1);  // per result: the input carrying it
    for (size_t q = 0; q < links.programs.size(); ++q) {
      const SubProgramLinks& l = links.programs[q];
      const int offset = scopes_[scopes[q]].offset;
      for (size_t i = 0; i < l.program->invars.size() && i < l.in_operand.size(); ++i) {
        const int v = offset + l.program->invars[i];
        if (l.in_operand[i] >= 0) {
          const size_t o = l.in_operand[i];
          ops[o] = o >= links.stacked_operands ? stack(spec_[v]) : spec_[v];
        }
        if (l.in_result[i] >= 0) carried[l.in_result[i]] = v;
      }
    }
    for (size_t q = 0; q < links.programs.size(); ++q) {
      const SubProgramLinks& l = links.programs[q];
      const int offset = scopes_[scopes[q]].offset;
      for (size_t j = 0; j < l.program->outvars.size() && j < l.out_result.size(); ++j) {
        const int r = l.out_result[j];
        if (r >= 0 && carried[r] < 0)
          made[r] = static_cast<size_t>(r) >= links.stacked_results ? stack(spec_[offset + l.program->outvars[j]])
                                                                    : spec_[offset + l.program->outvars[j]];
      }
    }
    for (size_t r = 0; r < made.size(); ++r)
      if (carried[r] >= 0) made[r] = spec_[carried[r]];
    if (runs_on_blocks(s, ops, made)) {
      made.clear();
    } else {
      for (size_t q = 0; q < links.programs.size(); ++q) {
        const SubProgramLinks& l = links.programs[q];
        SubProgramPlan sp{l.program, std::make_shared<const ShardingPlan>(plan_of(scopes[q])), {}, {}, l.copies};
        for (size_t i = 0; i < l.program->invars.size(); ++i) {
          const int o = i < l.in_operand.size() ? l.in_operand[i] : -1;
          sp.in.push_back(o >= 0 ? unstack(ops[o], static_cast<size_t>(o) >= links.stacked_operands)
                                 : sp.plan->value[l.program->invars[i]]);
        }
        for (size_t j = 0; j < l.program->outvars.size(); ++j) {
          const int r = j < l.out_result.size() ? l.out_result[j] : -1;
          sp.out.push_back(r >= 0 ? unstack(made[r], static_cast<size_t>(r) >= links.stacked_results)
                                  : Spec(l.program->avals[l.program->outvars[j]].shape.size()));
        }
        sub.push_back(std::move(sp));
      }
    }
    if (made == values(s.out_vars)) made.clear();
  }

  // XLA concatenates along a split dim by moving its axes to another dim
  // whose blocks they divide (an all-to-all of each operand), concatenating
  // the blocks and moving the axes back (an all-to-all of the result), rather
  // than gathering the operands: `operands` and the `result` computed get
  // the concatenated dim's axes on the first such dim.
  void retile_concatenated(const Site& s, std::vector<Spec>& operands, Spec& result) const {
    const int out = s.out_vars[0];
    const Spec& value = spec_[out];
    const Shape& shape = avals_[out].shape;
    for (size_t d = 0; d < shape.size() && d < value.size(); ++d) {
      if (value[d].empty() || !result[d].empty()) continue;
      const int64_t n = entry_size(value[d]);
      for (size_t e = 0; e < shape.size(); ++e) {
        if (e == d) continue;
        bool divides = (shape[e] / entry_size(result[e])) % n == 0;
        for (size_t i = 0; i < operands.size() && divides; ++i) {
          const Shape& in = avals_[s.in_vars[i]].shape;
          divides = operands[i][e] == result[e] && (in[e] / entry_size(operands[i][e])) % n == 0;
        }
        if (!divides) continue;
        for (Spec& o : operands) o[e].insert(o[e].end(), value[d].begin(), value[d].end());
        result[e].insert(result[e].end(), value[d].begin(), value[d].end());
        return;
      }
    }
  }

  // Whether `s`'s primitive runs on blocks with its operands laid out as
  // `operands` and its results as `results`: its local plan takes them as
  // they are and combines nothing.
  bool runs_on_blocks(const Site& s, const std::vector<Spec>& operands, const std::vector<Spec>& results) const {
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
      const std::optional<LocalPlan> lp = local_plan_for(*e.prim, in, e.params, out);
      if (!lp || !lp->reduce_axes.empty()) return false;
      for (size_t i = 0; i < in.size(); ++i)
        if (pad_spec(lp->in_specs[i], in[i].shape.size()) != in[i].spec) return false;
      for (size_t j = 0; j < out.size(); ++j)
        if (pad_spec(lp->out_specs[j], out[j].shape.size()) != out[j].spec) return false;
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

  // `operands` with the dims of permutation factors that the results cannot
  // hold split (their axes do not divide a padded size) laid out as the
  // operands' values are: XLA keeps such a split over blocks of the size
  // rounded up, as a pad's local plan runs it (structural_resizing.cpp).
  std::vector<Spec> kept_uneven(const Site& s, const std::vector<Spec>& operands) const {
    std::vector<Spec> kept = operands;
    for (size_t i = 0; i < s.num_in; ++i) {
      const std::vector<int>& dims = *s.dims[i];
      const Spec& value = spec_[s.in_vars[i]];
      std::set<std::string> used;
      for (const AxisNames& e : kept[i]) used.insert(e.begin(), e.end());
      for (size_t d = 0; d < dims.size() && d < value.size(); ++d) {
        if (dims[d] == kNoFactor || !s.permutation[dims[d]] || !kept[i][d].empty()) continue;
        bool free = true;
        for (const std::string& a : value[d]) free = free && !used.count(a);
        if (!free) continue;
        kept[i][d] = value[d];
        used.insert(value[d].begin(), value[d].end());
      }
    }
    return kept;
  }

  // The layouts `s`'s results are computed in: their values' with the dims
  // of permutation factors whole; empty when nothing differs.
  std::vector<Spec> computed_layouts(const Site& s) const {
    std::vector<Spec> layouts;
    bool differs = false;
    const size_t num_in = s.num_in;
    for (size_t t = num_in; t < s.vars.size(); ++t) {
      Spec spec = spec_[s.vars[t]];
      const std::vector<int>& dims = *s.dims[t];
      for (size_t d = 0; d < dims.size() && d < spec.size(); ++d)
        if (dims[d] != kNoFactor && s.permutation[dims[d]] && !spec[d].empty()) {
          spec[d].clear();
          differs = true;
        }
      layouts.push_back(std::move(spec));
    }
    if (!differs) layouts.clear();
    return layouts;
  }

  // Results whose layout the primitive itself decides (Primitive::fixed_result_specs).
  void fix_results(const Equation& e, const std::vector<int>& outputs) {
    if (!e.prim->fixed_result_specs) return;
    const std::vector<Spec> specs = e.prim->fixed_result_specs(e.params);
    for (size_t j = 0; j < outputs.size() && j < specs.size(); ++j) fix(outputs[j], specs[j]);
  }

  int64_t entry_size(const AxisNames& axes) const {
    int64_t n = 1;
    for (const auto& a : axes) n *= mesh_.axis_size(a);
    return n;
  }

  struct DimPart {
    int factor;
    int64_t size;
    AxisNames axes;  // of the dim's layout, those falling to this factor
  };

  // The factors of dim `d` of `s`'s value `t` laid out as `layout`: one, or a
  // compound dim's parts, each taking the axes that divide it, the next
  // part's only once it is split whole.
  std::vector<DimPart> parts_of(const Site& s, size_t t, size_t d, const AxisNames& layout) const {
    const auto it = s.compound.find({t, d});
    if (it == s.compound.end()) return {{(*s.dims[t])[d], avals_[s.vars[t]].shape[d], layout}};
    const auto& [factors, sizes] = it->second;
    std::vector<DimPart> parts;
    for (size_t k = 0; k < factors.size(); ++k) parts.push_back({factors[k], sizes[k], {}});
    size_t k = 0;
    int64_t rest = sizes[0];
    for (const std::string& axis : layout) {
      const int64_t n = mesh_.axis_size(axis);
      while (rest == 1 && k + 1 < parts.size()) rest = sizes[++k];
      if (rest % n != 0) break;
      parts[k].axes.push_back(axis);
      rest /= n;
    }
    return parts;
  }

  // The layout of dim `d` of `s`'s value `t` from its factors' layouts (a
  // compound dim's: its parts' axes in order while the parts before are
  // split whole).
  AxisNames joined(const Site& s, size_t t, size_t d, const std::vector<AxisNames>& fs) const {
    const int f = (*s.dims[t])[d];
    const auto it = s.compound.find({t, d});
    if (it == s.compound.end()) return f == kNoFactor ? AxisNames{} : fs[f];
    const auto& [factors, sizes] = it->second;
    AxisNames axes;
    for (size_t k = 0; k < factors.size(); ++k) {
      axes.insert(axes.end(), fs[factors[k]].begin(), fs[factors[k]].end());
      if (entry_size(fs[factors[k]]) != sizes[k]) break;
    }
    return axes;
  }

  // The layout of every factor of `s` from its values' current layouts;
  // `planning`: for computing on (operands may be cut over axes no value of
  // `s` uses, which propagation does not give the values).
  std::vector<AxisNames> resolve(const Site& s, bool planning = false) const {
    const int nf = s.map.num_factors;
    std::vector<AxisNames> fs(nf);
    std::vector<int64_t> weight(nf, -1), size(nf, 0);
    std::vector<bool> in_result(nf, false);
    const size_t num_in = s.num_in;
    // The values' axes for each factor (unsharded ones say nothing): the
    // longest when all are prefixes of it, their common prefix otherwise.
    std::vector<bool> any(nf, false), from_operand(nf, false), split_in_result(nf, false);
    std::vector<std::vector<AxisNames>> candidates(nf);  // per factor: the operands' axes, in order
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
          if (axes.empty()) continue;
          weight[f] = std::max(weight[f], elements(a));
          from_operand[f] = from_operand[f] || t < num_in;
          split_in_result[f] = split_in_result[f] || t >= num_in;
          if (t < num_in) candidates[f].push_back(axes);
          if (!any[f]) {
            fs[f] = axes;
            any[f] = true;
          } else if (is_prefix(fs[f], axes)) {
            fs[f] = axes;
          } else if (!is_prefix(axes, fs[f])) {
            size_t k = 0;
            while (k < axes.size() && k < fs[f].size() && axes[k] == fs[f][k]) ++k;
            fs[f].resize(k);
          }
        }
      }
    }
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
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (deferred(a) != deferred(b)) return deferred(b);
      if (weight[a] != weight[b]) return weight[a] > weight[b];
      return from_operand[a] && !from_operand[b];
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
          if (used.count(a) || size[f] % (n * k) != 0) break;
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
      for (int f = 0; f < nf; ++f)
        if (!in_result[f] && fs[f].empty() && !candidates[f].empty()) fs[f] = split_over_idle_axes(s, f, fs, size[f]);
    return fs;
  }

  // A contracted factor that an operand splits over axes other factors use,
  // while some mesh axes split nothing: XLA moves that operand's blocks to
  // pieces split over the idle axes (a collective-permute) and either
  // gathers them (runtime/interpreter.cpp `gathered_through_idle_axes`) or,
  // when it moves no more, computes on them and all-reduces the partial
  // results over the idle axes. Those axes in the latter case, none otherwise.
  AxisNames split_over_idle_axes(const Site& s, int f, const std::vector<AxisNames>& fs, int64_t size) const {
    std::set<std::string> used;
    for (const AxisNames& axes : fs) used.insert(axes.begin(), axes.end());
    int64_t split = 0;
    size_t split_operand = 0;
    for (size_t t = 0; t < s.num_in; ++t) {
      const std::vector<int>& dims = *s.dims[t];
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] != f || spec_[s.vars[t]][d].empty()) continue;
        if (split) return {};  // more than one operand splits it
        for (const std::string& a : spec_[s.vars[t]][d])
          if (!used.count(a)) return {};
        split = entry_size(spec_[s.vars[t]][d]);
        split_operand = t;
      }
    }
    AxisNames idle;
    for (const std::string& a : mesh_.axis_names)
      if (!used.count(a) && mesh_.axis_size(a) > 1) idle.push_back(a);
    const int64_t n = entry_size(idle);
    if (!split || idle.empty() || n <= split || n % split != 0 || size % n != 0) return {};
    std::vector<AxisNames> moved = fs;
    moved[f] = idle;
    const int64_t gather = block_bytes(s, split_operand, moved) * (n - 1);
    int64_t reduce = 0;
    for (size_t t = s.num_in; t < s.vars.size(); ++t) reduce += 2 * block_bytes(s, t, moved) * (n - 1) / n;
    return reduce <= gather ? idle : AxisNames{};
  }

  // Whether `spec` lays any dim out over one of `axes`.
  static bool uses_any(const Spec& spec, const AxisNames& axes) {
    for (const AxisNames& e : spec)
      for (const std::string& a : e)
        if (std::find(axes.begin(), axes.end(), a) != axes.end()) return true;
    return false;
  }

  // Bytes of value `v`'s block were its dims laid out as the factors say
  // (`t`: its place in the site).
  int64_t block_bytes(const Site& s, size_t t, const std::vector<AxisNames>& fs) const {
    const Aval& a = avals_[s.vars[t]];
    const std::vector<int>& dims = *s.dims[t];
    int64_t n = static_cast<int64_t>(itemsize(a.dtype));
    for (size_t d = 0; d < dims.size(); ++d)
      n *= a.shape[d] / (dims[d] == kNoFactor ? 1 : entry_size(joined(s, t, d, fs)));
    return n;
  }

  // A contracted factor sharded as `fs[f]` on operands that are not all laid
  // out so: computed sharded (operands sliced, results all-reduced) or whole
  // (the sharded operands all-gathered). As XLA's partitioner decides it:
  // whole when a result is laid out over the factor's axes or when the
  // operands' layouts leave devices computing the same blocks (some axis
  // splits none of them); otherwise whichever moves fewer bytes.
  // While propagating (`planning` false), an open operand that an equation
  // computes (not a sub-program's input: a loop's carry is tied to its
  // initial value) and that is not yet laid out along the factor does not
  // differ where its other dims leave the axes free: it gains them, as
  // Shardy gives an open value the compatible axes before the partitioner
  // weighs any move.
  AxisNames contracted_layout(const Site& s, int f, const std::vector<AxisNames>& fs, bool planning) const {
    const size_t num_in = s.num_in;
    bool differs = false;
    int64_t gather = 0;
    std::set<std::string> operand_axes;
    for (size_t t = 0; t < num_in; ++t) {
      const std::vector<int>& dims = *s.dims[t];
      for (size_t d = 0; d < dims.size(); ++d) {
        const AxisNames& axes = spec_[s.vars[t]][d];
        operand_axes.insert(axes.begin(), axes.end());
        if (dims[d] != f) continue;
        const int v = s.vars[t];
        differs |= axes != fs[f] && (planning || !axes.empty() || fixed_[v] || !computed_[v] ||
                                     uses_any(spec_[v], fs[f]));
        if (axes.empty()) continue;
        std::vector<AxisNames> own = fs;
        own[f] = axes;
        gather += block_bytes(s, t, own) * (entry_size(axes) - 1);
      }
    }
    if (!differs) return fs[f];
    for (size_t t = num_in; t < s.vars.size(); ++t)
      for (const AxisNames& axes : spec_[s.vars[t]])
        for (const std::string& a : axes)
          if (std::find(fs[f].begin(), fs[f].end(), a) != fs[f].end()) return {};
    int64_t covered = 1;
    for (const std::string& a : operand_axes) covered *= mesh_.axis_size(a);
    if (covered != mesh_.size()) return {};
    const int64_t n = entry_size(fs[f]);
    int64_t reduce = 0;
    for (size_t t = num_in; t < s.vars.size(); ++t) reduce += 2 * block_bytes(s, t, fs) * (n - 1) / n;
    return gather < reduce ? AxisNames{} : fs[f];
  }

  // Open values of `s` gain the axes their factors' layouts add.
  bool apply(const Site& s, bool pass_through_only = false) {
    if (s.vars.empty() || (pass_through_only && !passes_through(s))) return false;
    const std::vector<AxisNames> fs = resolve(s);
    bool changed = false;
    for (size_t t = 0; t < s.vars.size(); ++t) {
      const int v = s.vars[t];
      if (fixed_[v]) continue;
      const std::vector<int>& dims = *s.dims[t];
      Spec& spec = spec_[v];
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] == kNoFactor) continue;
        const AxisNames want = joined(s, t, d, fs);
        if (want.size() <= spec[d].size() || !is_prefix(spec[d], want)) continue;
        std::set<std::string> elsewhere;
        for (size_t o = 0; o < spec.size(); ++o)
          if (o != d) elsewhere.insert(spec[o].begin(), spec[o].end());
        AxisNames grown = spec[d];
        for (size_t k = spec[d].size(); k < want.size(); ++k) {
          // Only Auto axes are chosen here; Explicit ones are the types'.
          if (elsewhere.count(want[k]) || mesh_.is_explicit(want[k])) break;
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

  const Mesh& mesh_;
  Avals avals_;  // every value's type, the sub-programs' after the program's
  std::vector<Spec> spec_;
  std::vector<bool> fixed_;
  std::vector<bool> computed_;  // per value: an equation's result (not a program's input)
  std::vector<Site> sites_;
  std::vector<Scope> scopes_;
};

}  // namespace

std::optional<ControlFlowLinks> sub_program_links(const Primitive& prim, const Params& params) {
  if (!prim.sub_program_links) return std::nullopt;
  return prim.sub_program_links(params);
}

ShardingPlan propagate_shardings(const Program& program, const Mesh& mesh,
                                 const std::vector<std::optional<Spec>>& args,
                                 const std::vector<std::optional<Spec>>& results) {
  Propagator p(program, mesh);
  for (size_t i = 0; i < program.invars.size() && i < args.size(); ++i)
    p.fix(program.invars[i], args[i].value_or(Spec{}));
  for (size_t j = 0; j < program.outvars.size() && j < results.size(); ++j)
    if (results[j]) p.fix(program.outvars[j], *results[j]);
  p.run();
  return p.plan();
}

FactorMap program_factors(const Program& program) {
  // Symbolic ids: one per dimension of each input, merged where an equation
  // puts two of them in one factor (they must be laid out alike); an id is
  // blocked where some equation cannot compute it on blocks alone.
  std::vector<int> parent;
  std::vector<bool> blocked;
  auto root = [&](int s) {
    while (parent[s] != s) s = parent[s] = parent[parent[s]];
    return s;
  };
  auto block = [&](int s) {
    if (s >= 0) blocked[root(s)] = true;
  };
  auto merge = [&](int a, int b) {
    a = root(a), b = root(b);
    if (a == b) return;
    parent[b] = a;
    blocked[a] = blocked[a] || blocked[b];
  };
  std::vector<std::vector<int>> id(program.avals.size());
  for (size_t v = 0; v < program.avals.size(); ++v) id[v].assign(program.avals[v].shape.size(), -1);
  for (int v : program.invars)
    for (int& s : id[v]) {
      s = static_cast<int>(parent.size());
      parent.push_back(s);
      blocked.push_back(false);
    }
  for (const Equation& e : program.eqns) {
    Avals in, out;
    for (int v : e.inputs) in.push_back(program.avals[v]);
    for (int v : e.outputs) out.push_back(program.avals[v]);
    std::optional<FactorMap> m;
    if (!e.prim->is_collective() && !e.prim->array_kernel) {
      try {
        m = factors_of(*e.prim, in, e.params, out);
      } catch (const std::exception&) {
        m.reset();
      }
    }
    if (!m) {
      for (int v : e.inputs)
        for (int s : id[v]) block(s);
      continue;
    }
    // Per factor of the equation: the id its operands give it (-2: none
    // yet; -1: a dimension without id, which blocks the others).
    std::vector<int> fid(m->num_factors, -2);
    for (size_t i = 0; i < e.inputs.size(); ++i)
      for (size_t d = 0; d < m->in[i].size(); ++d) {
        const int f = m->in[i][d], s = id[e.inputs[i]][d];
        if (f == kNoFactor) {
          block(s);
        } else if (fid[f] == -2) {
          fid[f] = s;
        } else if (s < 0 || fid[f] < 0) {
          block(s), block(fid[f]);
          fid[f] = -1;
        } else {
          merge(fid[f], s);
        }
      }
    std::vector<bool> in_result(m->num_factors, false);
    for (size_t j = 0; j < e.outputs.size(); ++j)
      for (size_t d = 0; d < m->out[j].size(); ++d) {
        const int f = m->out[j][d];
        if (f == kNoFactor) continue;
        in_result[f] = true;
        if (fid[f] >= 0) id[e.outputs[j]][d] = fid[f];
      }
    for (int f = 0; f < m->num_factors; ++f)
      if (!in_result[f]) block(fid[f]);  // contracted: partial results would need a reduction
  }
  // A value whose dimensions share an id could not be laid out.
  auto check_distinct = [&](int v) {
    for (size_t d = 0; d < id[v].size(); ++d)
      for (size_t k = d + 1; k < id[v].size(); ++k)
        if (id[v][d] >= 0 && id[v][k] >= 0 && root(id[v][d]) == root(id[v][k])) block(id[v][d]);
  };
  for (int v : program.invars) check_distinct(v);
  for (int v : program.outvars) check_distinct(v);
  // Factors: the unblocked ids that reach an output.
  std::vector<int> factor(parent.size(), kNoFactor);
  FactorMap m;
  for (int v : program.outvars)
    for (int s : id[v])
      if (s >= 0 && !blocked[root(s)] && factor[root(s)] == kNoFactor) factor[root(s)] = m.num_factors++;
  auto dims = [&](int v) {
    std::vector<int> f(id[v].size(), kNoFactor);
    for (size_t d = 0; d < f.size(); ++d)
      if (id[v][d] >= 0) f[d] = factor[root(id[v][d])];
    return f;
  };
  for (int v : program.invars) m.in.push_back(dims(v));
  for (int v : program.outvars) m.out.push_back(dims(v));
  return m;
}

std::optional<ProgramPtr> local_program(const Program& program, const MeshPtr& mesh,
                                        const std::vector<Spec>& in_specs, std::vector<Spec>& out_specs) {
  std::vector<std::optional<Spec>> args(in_specs.begin(), in_specs.end());
  const ShardingPlan plan = propagate_shardings(program, *mesh, args);
  auto local = std::make_shared<Program>(program);
  auto laid_out = [&](int v) {
    Aval a = program.avals[v];
    a.mesh = mesh;
    a.spec = plan.value[v];
    return a;
  };
  // Equations whose results nothing reads (the loss value a gradient's body still
  // computes) need no layout: they are left out rather than planned.
  std::vector<bool> live(program.avals.size(), false), kept(program.eqns.size(), false);
  for (int v : program.outvars) live[v] = true;
  for (size_t k = program.eqns.size(); k-- > 0;) {
    const Equation& e = program.eqns[k];
    kept[k] = e.outputs.empty() || e.prim->has_effects;
    for (int v : e.outputs) kept[k] = kept[k] || live[v];
    if (kept[k])
      for (int v : e.inputs) live[v] = true;
  }
  // A reshard of a value broadcast from a scalar (a cotangent seed laid out as its
  // primal) needs no other device's data: each block is that scalar broadcast.
  // (Any layout-only primitive: it changes where the value lives, not what it is;
  // any primitive moving the scalar's one element: every element is that one.)
  std::vector<int> producer(program.avals.size(), -1);
  for (size_t k = 0; k < program.eqns.size(); ++k)
    for (int v : program.eqns[k].outputs) producer[v] = static_cast<int>(k);
  auto broadcast_scalar = [&](const Equation& e) -> std::optional<int> {
    if (!e.prim->layout_only || e.inputs.size() != 1) return std::nullopt;
    const int from = producer[e.inputs[0]];
    if (from < 0 || !program.eqns[from].prim->moves_elements) return std::nullopt;
    const int scalar = program.eqns[from].inputs.at(0);
    if (!program.avals[scalar].shape.empty() || !program.avals[scalar].unreduced.empty()) return std::nullopt;
    return scalar;
  };
  try {
    for (size_t v = 0; v < program.avals.size(); ++v) {
      Aval& a = local->avals[v];
      Sharding blocks;
      blocks.mesh = mesh;
      blocks.spec = plan.value[v];
      a.shape = blocks.local_shape(a.shape);
      a.mesh = nullptr;
      a.spec.clear();
    }
    for (size_t k = 0; k < program.eqns.size(); ++k) {
      const Equation& e = program.eqns[k];
      if (!kept[k]) continue;
      if (const std::optional<int> scalar = broadcast_scalar(e)) {
        Equation& block = local->eqns[k];
        block.prim = &primitive("broadcast_in_dim");
        block.inputs = {*scalar};
        block.params = Params{{"shape", IntList(local->avals[e.outputs[0]].shape)},
                              {"broadcast_dimensions", IntList{}}};
        continue;
      }
      if (e.prim->is_collective() || e.prim->array_kernel) return std::nullopt;
      bool sharded = false;
      Avals ins, outs;
      for (size_t i = 0; i < e.inputs.size(); ++i) {
        if (plan.operand[k][i] != plan.value[e.inputs[i]]) return std::nullopt;  // a reshard
        sharded |= !is_replicated(plan.value[e.inputs[i]]);
        ins.push_back(laid_out(e.inputs[i]));
      }
      for (int v : e.outputs) {
        sharded |= !is_replicated(plan.value[v]);
        outs.push_back(laid_out(v));
      }
      if (!sharded) continue;  // every device computes the whole equation
      const std::optional<LocalPlan> lp = local_plan_for(*e.prim, ins, e.params, outs);
      if (!lp) return std::nullopt;
      // Partial results the outputs' types keep unreduced stay each device's own
      // term; any other reduction would need a collective inside the program.
      for (const auto& axis : lp->reduce_axes)
        for (const Aval& o : outs)
          if (std::find(o.unreduced.begin(), o.unreduced.end(), axis) == o.unreduced.end()) return std::nullopt;
      for (size_t i = 0; i < e.inputs.size(); ++i)
        if (pad_spec(lp->in_specs[i], ins[i].shape.size()) != ins[i].spec) return std::nullopt;
      for (size_t j = 0; j < e.outputs.size(); ++j)
        if (pad_spec(lp->out_specs[j], outs[j].shape.size()) != outs[j].spec) return std::nullopt;
      local->eqns[k].params = lp->params;
    }
  } catch (const std::exception&) {
    return std::nullopt;  // a layout that does not divide a dimension
  }
  std::vector<Equation> eqns;
  for (size_t k = 0; k < local->eqns.size(); ++k)
    if (kept[k]) eqns.push_back(std::move(local->eqns[k]));
  local->eqns = std::move(eqns);
  out_specs.clear();
  for (int v : program.outvars) out_specs.push_back(plan.value[v]);
  return local;
}

FactorRule call_factors(std::string param) {
  return [param = std::move(param)](const Avals& in, const Params& p,
                                    const Avals& out) -> std::optional<FactorMap> {
    const FactorMap program = program_factors(*p.get<ProgramPtr>(param));
    if (program.in.size() > in.size() || program.out.size() != out.size()) return std::nullopt;
    FactorMap m = blank_factors(in, out);
    m.num_factors = program.num_factors;
    std::copy(program.in.begin(), program.in.end(), m.in.begin());
    m.out = program.out;
    return m;
  };
}

PlanRule call_plan(std::string param) {
  return [param = std::move(param)](const Avals& in, const Params& p,
                                    const Avals&) -> std::optional<LocalPlan> {
    const ProgramPtr& program = p.get<ProgramPtr>(param);
    if (program->invars.size() > in.size()) return std::nullopt;
    MeshPtr mesh;
    LocalPlan plan;
    for (const Aval& a : in) {
      plan.in_specs.push_back(spec_of(a));
      if (!a.mesh) continue;
      if (!mesh) mesh = a.mesh;
      for (const AxisNames& entry : plan.in_specs.back())
        for (const std::string& axis : entry)
          if (a.mesh->is_explicit(axis)) return std::nullopt;
    }
    if (!mesh) return std::nullopt;
    const std::vector<Spec> program_in(plan.in_specs.begin(), plan.in_specs.begin() + program->invars.size());
    const std::optional<ProgramPtr> local = local_program(*program, mesh, program_in, plan.out_specs);
    if (!local) return std::nullopt;
    plan.params = p;
    plan.params.set(param, *local);
    return plan;
  };
}

std::vector<Spec> sub_program_specs(const Avals&, const Params&, const Avals& out) {
  std::vector<Spec> specs;
  for (const Aval& o : out) specs.push_back(o.mesh ? o.spec : Spec{});
  return specs;
}

}  // namespace meshsim

