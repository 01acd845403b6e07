#include "meshsim/sharding/propagator.h"

#include <algorithm>
#include <memory>

#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"

// Control flow and calls: their sub-programs join the propagation, and a
// call's body may run as one local program on every device's blocks.

namespace meshsim::propagation {

void Propagator::add_call(size_t id, size_t k, ControlFlowLinks links, const std::vector<int>& in_vars,
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

void Propagator::add_link(int a, int b, bool a_stacked, bool b_stacked) {
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

void Propagator::plan_call(const Site& s, const ControlFlowLinks& links, const std::vector<size_t>& scopes,
                           std::vector<Spec>& ops, std::vector<Spec>& made,
                           std::vector<SubProgramPlan>& sub) const {
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

}  // namespace meshsim::propagation

namespace meshsim {

std::optional<ControlFlowLinks> sub_program_links(const Primitive& prim, const Params& params) {
  if (!prim.sub_program_links) return std::nullopt;
  return prim.sub_program_links(params);
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
    // A scalar laid out over the mesh (JAX's seed `reshard 1.0`) is that scalar on every device.
    const Aval& operand = program.avals[e.inputs[0]];
    if (operand.shape.empty() && operand.unreduced.empty()) return e.inputs[0];
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
