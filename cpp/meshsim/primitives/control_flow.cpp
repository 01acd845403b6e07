// Control flow: `cond` (one of several branch programs, chosen by an index),
// `while` (a body program repeated while a predicate program holds) and `scan`
// (a body program over the leading axis of its operands, carrying state), with
// JAX's names and params. Each holds its sub-programs as params (traced by the
// Python layer on the operands' exact types, so operands are not pvary'd and
// outputs keep the sub-programs' VMA). `kernel` runs the sub-programs on one
// device's tensors; inside a shard_map body, an equation whose sub-programs
// hold collectives runs by `mesh_call`: every sub-program call (one loop
// iteration, one branch) is a run of the mesh executor over all devices.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "meshsim/ir/donated_operands.h"
#include "meshsim/ir/ops.h"
#include "meshsim/primitives/control_flow.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/sub_program_calls.h"
#include "meshsim/runtime/xla_rewrites.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/propagation.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

// Runs a sub-program on each device's inputs: one device's tensors (the
// kernels) or every device of a mesh at once (mesh_call). XLA compiles a
// control-flow primitive, called eagerly or not, so a sub-program runs as
// XLA compiles it (runtime/xla_rewrites.h), unless it is run partitioned.
using Runner = std::function<std::vector<Tensors>(const ProgramPtr&, std::vector<Tensors>)>;

Runner local_runner() {
  return [](const ProgramPtr& p, std::vector<Tensors> in) {
    // Moved in: a braced list would copy every result (a Tensor copy allocates its shape and strides).
    std::vector<Tensors> out(1);
    out[0] = run_program(as_xla_compiles_within(p), std::move(in[0]));
    return out;
  };
}

Runner mesh_runner(const MeshContext& ctx) {
  return [&ctx](const ProgramPtr& p, std::vector<Tensors> in) {
    const bool partitioned = PartitionedSubPrograms::find(p.get()) != nullptr;
    return run_on_mesh(partitioned ? p : as_xla_compiles_within(p), ctx, std::move(in));
  };
}

// A primitive's kernel and mesh_call from one implementation over devices,
// which takes its operands by value and moves them on into the sub-programs
// (the kernel's donated operands are moved in, the others copied).
template <class F>
void set_runners(Primitive& p, F run) {
  p.kernel = [run](const Tensors& in, const Params& params, const Avals& out) {
    std::vector<Tensors> device(1);
    device[0] = operands_passed_on(in);
    return std::move(run(local_runner(), std::move(device), params, out)[0]);
  };
  p.mesh_call = [run](const MeshContext& ctx, const std::vector<Tensors>& in, const Params& params,
                      const Avals& out) { return run(mesh_runner(ctx), in, params, out); };
}

bool same_shape_dtype(const Aval& a, const Aval& b) { return a.shape == b.shape && a.dtype == b.dtype; }

// Checks operands [first, first + count) against `program`'s inputs.
void check_call(const char* prim, const char* what, const Program& program, const Avals& in,
                size_t first, size_t count) {
  const Avals want = program.in_avals();
  if (count != want.size())
    fail<TypeError>(prim, " ", what, " takes ", want.size(), " inputs, got ", count);
  for (size_t i = 0; i < count; ++i)
    if (!same_shape_dtype(in[first + i], want[i]))
      fail<TypeError>(prim, " ", what, " input ", i, " has type ", want[i].str_short(),
                      " but the operand has type ", in[first + i].str_short());
}

// Each device's operands [first, first + count), moved out of `in`.
std::vector<Tensors> take_devices(std::vector<Tensors>& in, size_t first, size_t count) {
  std::vector<Tensors> out;
  out.reserve(in.size());
  for (Tensors& d : in)
    out.emplace_back(std::make_move_iterator(d.begin() + first), std::make_move_iterator(d.begin() + first + count));
  return out;
}

void append_devices(std::vector<Tensors>& to, const std::vector<Tensors>& from) {
  for (size_t d = 0; d < to.size(); ++d) to[d].insert(to[d].end(), from[d].begin(), from[d].end());
}

// Values of 0-d int32/bool tensors.
int64_t scalar_value(const Tensor& t) {
  if (t.dtype() == DType::Bool) return *t.data<bool>();
  return *t.contiguous().data<int32_t>();
}


// A loop body's factors that survive iteration: a carry's dim keeps its
// factor only where the body gives the carry back laid out as it came
// (carries are the body's inputs from `first_carry` on, its first outputs).
std::function<int(int)> carried_factors(const FactorMap& body, size_t first_carry, size_t num_carry) {
  auto kept = std::make_shared<std::vector<bool>>(body.num_factors, true);
  for (size_t j = 0; j < num_carry; ++j) {
    const std::vector<int>&came = body.in[first_carry + j], &back = body.out[j];
    for (size_t d = 0; d < came.size(); ++d)
      if (came[d] != back[d])
        for (int f : {came[d], back[d]})
          if (f != kNoFactor) (*kept)[f] = false;
  }
  return [kept](int f) { return f != kNoFactor && (*kept)[f] ? f : kNoFactor; };
}

// The specs of `in` (padded to their ranks) from `first` on, `count` of them.
std::vector<Spec> specs_of(const Avals& in, size_t first, size_t count) {
  std::vector<Spec> out;
  for (size_t i = first; i < first + count; ++i) out.push_back(spec_of(in[i]));
  return out;
}

MeshPtr mesh_of(const Avals& in) {
  for (const Aval& a : in)
    if (a.mesh) return a.mesh;
  return nullptr;
}

// The operands of a loop over an equation's known part: of the known
// operands' values (`known_in` marks them), those `taken` marks.
Values taken_operands(const std::vector<bool>& known_in, const std::vector<bool>& taken, const Values& known_values) {
  Values operands;
  for (size_t i = 0, a = 0; i < known_in.size(); ++i) {
    if (!known_in[i]) continue;
    if (taken[i]) operands.push_back(known_values[a]);
    ++a;
  }
  return operands;
}

// --- cond --------------------------------------------------------------------
// cond(index, *operands; branches): runs branches[clamp(index)] on operands.

Avals cond_eval(const Avals& in, const Params& params) {
  const ProgramList& branches = params.get<ProgramList>("branches");
  if (branches.empty()) fail<TypeError>("cond requires at least one branch function");
  if (in.empty() || in[0].dtype != DType::Int32 || !in[0].shape.empty())
    fail<TypeError>("cond called with index of type ", in.empty() ? "None" : in[0].str_short(),
                    " but index must be an int32 scalar");
  const Avals out = branches[0]->out_avals();
  for (size_t b = 0; b < branches.size(); ++b) {
    check_call("cond", "branch", *branches[b], in, 1, in.size() - 1);
    const Avals ob = branches[b]->out_avals();
    if (ob.size() != out.size())
      fail<TypeError>("cond branches must return the same number of outputs, got ", out.size(),
                      " and ", ob.size());
    for (size_t j = 0; j < ob.size(); ++j)
      if (!same_shape_dtype(ob[j], out[j]) || ob[j].vma != out[j].vma)
        fail<TypeError>("cond branches must have equal output types, got ", out[j].str_short(),
                        " and ", ob[j].str_short(), " for output ", j);
  }
  return out;
}

// Devices may choose different branches (an index varying over the mesh):
// each chosen branch then runs over the whole mesh, as a vmapped cond selects,
// and every device keeps the results of its own.
std::vector<Tensors> cond_run(const Runner& run, std::vector<Tensors> in, const Params& params,
                              const Avals&) {
  const ProgramList& branches = params.get<ProgramList>("branches");
  const int64_t last = static_cast<int64_t>(branches.size()) - 1;
  std::vector<int64_t> choice;
  for (const Tensors& d : in) choice.push_back(std::clamp<int64_t>(scalar_value(d[0]), 0, last));
  std::vector<Tensors> operands = take_devices(in, 1, in[0].size() - 1);
  std::vector<Tensors> out(in.size());
  const std::set<int64_t> chosen(choice.begin(), choice.end());
  for (int64_t b : chosen) {
    // The last branch to run takes the operands (its last reads then move them).
    std::vector<Tensors> res = run(branches[b], b == *chosen.rbegin() ? std::move(operands) : operands);
    for (size_t d = 0; d < in.size(); ++d)
      if (choice[d] == b) out[d] = std::move(res[d]);
  }
  return out;
}

// Sharding propagation over Auto axes: operand and result dims share a
// factor when every branch links them alike (its program's factor map); the
// index, and dims some branch computes whole, have none.
std::optional<FactorMap> cond_factors(const Avals& in, const Params& params, const Avals& out) {
  const ProgramList& branches = params.get<ProgramList>("branches");
  std::vector<FactorMap> maps;
  for (const ProgramPtr& b : branches) maps.push_back(program_factors(*b));
  FactorMap m = blank_factors(in, out);
  std::map<std::vector<int>, int> combined;  // per-branch factors -> one factor
  auto factor_of = [&](auto pick) {
    std::vector<int> key;
    for (const FactorMap& b : maps) {
      key.push_back(pick(b));
      if (key.back() == kNoFactor) return kNoFactor;
    }
    auto [it, fresh] = combined.emplace(key, m.num_factors);
    if (fresh) ++m.num_factors;
    return it->second;
  };
  for (size_t i = 1; i < in.size(); ++i)
    for (size_t d = 0; d < m.in[i].size(); ++d) m.in[i][d] = factor_of([&](const FactorMap& b) { return b.in[i - 1][d]; });
  for (size_t j = 0; j < out.size(); ++j)
    for (size_t d = 0; d < m.out[j].size(); ++d) m.out[j][d] = factor_of([&](const FactorMap& b) { return b.out[j][d]; });
  return m;
}

// Shardy's propagation through the branches: each takes the operands after
// the index and gives the results.
std::optional<ControlFlowLinks> cond_links(const Params& params) {
  ControlFlowLinks links;
  for (const ProgramPtr& b : params.get<ProgramList>("branches")) {
    SubProgramLinks l{b, {}, std::vector<int>(b->invars.size(), -1), {}};
    for (size_t i = 0; i < b->invars.size(); ++i) l.in_operand.push_back(static_cast<int>(i) + 1);
    for (size_t j = 0; j < b->outvars.size(); ++j) l.out_result.push_back(static_cast<int>(j));
    links.programs.push_back(std::move(l));
  }
  return links;
}

// Each device runs the chosen branch on its own blocks when every branch,
// made local for the operands' layouts, needs no communication and lays its
// results out alike (the index is replicated: every device takes one branch).
std::optional<LocalPlan> cond_plan(const Avals& in, const Params& params, const Avals&) {
  const MeshPtr mesh = mesh_of(in);
  if (!mesh || !is_replicated(spec_of(in[0]))) return std::nullopt;
  LocalPlan plan;
  plan.in_specs = specs_of(in, 0, in.size());
  const std::vector<Spec> branch_in = specs_of(in, 1, in.size() - 1);
  ProgramList local;
  for (const ProgramPtr& b : params.get<ProgramList>("branches")) {
    std::vector<Spec> branch_out;
    const std::optional<ProgramPtr> l = local_program(*b, mesh, branch_in, branch_out);
    if (!l || (!local.empty() && branch_out != plan.out_specs)) return std::nullopt;
    plan.out_specs = std::move(branch_out);
    local.push_back(*l);
  }
  plan.params = params;
  plan.params.set("branches", local);
  return plan;
}

// Each branch is split by vjp_program; the forward cond returns every
// branch's residuals (zeros for the branches not taken), the backward cond
// runs the chosen branch's backward program on its own.
VjpSplit cond_vjp(const Values& in, const std::vector<bool>& active, const Params& params) {
  const ProgramList& branches = params.get<ProgramList>("branches");
  const size_t num_ops = in.size() - 1, num_out = branches[0]->outvars.size();
  const std::vector<bool> wrt(active.begin() + 1, active.end());
  auto splits = std::make_shared<std::vector<VjpPrograms>>();
  Avals res_avals;
  std::vector<size_t> res_offset;
  for (const ProgramPtr& b : branches) {
    splits->push_back(vjp_program(*b, wrt, std::vector<bool>(num_out, true)));
    res_offset.push_back(res_avals.size());
    const Avals fo = splits->back().fwd->out_avals();
    res_avals.insert(res_avals.end(), fo.begin() + num_out, fo.end());
  }
  Avals op_avals;
  for (size_t i = 0; i < num_ops; ++i) op_avals.push_back(aval_of(in[i + 1]));
  ProgramList fwd;
  for (size_t b = 0; b < branches.size(); ++b)
    fwd.push_back(trace_program(op_avals, [&](const Values& args) {
      const Values outs = eval_program(*(*splits)[b].fwd, args);
      Values r(outs.begin(), outs.begin() + num_out);
      for (size_t k = 0; k < res_avals.size(); ++k) {
        const bool own = k >= res_offset[b] && k < res_offset[b] + (*splits)[b].num_residuals;
        r.push_back(own ? outs[num_out + k - res_offset[b]] : ops::zeros(res_avals[k]));
      }
      return r;
    }));
  Params fwd_params = params;
  fwd_params.set("branches", fwd);
  Values fwd_out = meshsim::bind(primitive("cond"), in, fwd_params);
  Values outs(fwd_out.begin(), fwd_out.begin() + num_out);
  const Values residuals(fwd_out.begin() + num_out, fwd_out.end());
  Avals out_avals;
  for (const Value& v : outs) out_avals.push_back(aval_of(v));

  auto backward = [=, index = in[0]](const Cotangents& ct) {
    // Operands: the cotangents of the inexact outputs, then all residuals.
    std::vector<size_t> ct_outputs;
    Values operands;
    for (size_t j = 0; j < num_out; ++j)
      if (is_inexact(out_avals[j].dtype)) {
        ct_outputs.push_back(j);
        operands.push_back(vary_over(ops::instantiate(ct[j], out_avals[j]), out_avals[j].vma));
      }
    operands.insert(operands.end(), residuals.begin(), residuals.end());
    std::vector<size_t> ct_inputs;
    for (size_t i = 0; i < num_ops; ++i)
      for (const VjpPrograms& s : *splits)
        if (s.ct_out[i]) {
          ct_inputs.push_back(i);
          break;
        }
    Avals bwd_in;
    for (const Value& v : operands) bwd_in.push_back(aval_of(v));
    ProgramList bwd;
    for (size_t b = 0; b < splits->size(); ++b) {
      const VjpPrograms& s = (*splits)[b];
      bwd.push_back(trace_program(bwd_in, [&](const Values& args) {
        Values bargs;
        for (size_t k = 0; k < ct_outputs.size(); ++k)
          if (s.ct_in[ct_outputs[k]]) bargs.push_back(args[k]);
        const size_t first = ct_outputs.size() + res_offset[b];
        bargs.insert(bargs.end(), args.begin() + first, args.begin() + first + s.num_residuals);
        const Values cts = eval_program(*s.bwd, bargs);
        Values r;
        for (size_t i : ct_inputs) {
          size_t pos = 0;
          for (size_t q = 0; q < i; ++q) pos += s.ct_out[q];
          r.push_back(s.ct_out[i] ? vary_over(cts[pos], op_avals[i].vma) : ops::zeros(op_avals[i]));
        }
        return r;
      }));
    }
    Values cond_in{index};
    cond_in.insert(cond_in.end(), operands.begin(), operands.end());
    Params bwd_params = params;
    bwd_params.set("branches", bwd);
    const Values res = meshsim::bind(primitive("cond"), cond_in, bwd_params);
    Cotangents result(num_ops + 1);
    for (size_t k = 0; k < ct_inputs.size(); ++k) result[ct_inputs[k] + 1] = res[k];
    return result;
  };
  return VjpSplit{outs, backward};
}

// A cond whose index is known splits by its branches' known parts (as JAX's
// cond partial evaluation): an output is known when every branch computes it
// from known operands. The known cond gives the known outputs and each
// branch's residuals (zeros in the slots of the other branches'); the staged
// cond takes them all, each branch reading its own. An unknown index stages
// the cond whole.
std::optional<EquationSplit> cond_partial_eval(const Equation& e, const Avals& in, const std::vector<bool>& known_in) {
  if (!known_in[0]) return std::nullopt;
  const ProgramList& branches = e.params.get<ProgramList>("branches");
  const std::vector<bool> ops_known(known_in.begin() + 1, known_in.end());
  const size_t num_out = branches[0]->outvars.size();
  std::vector<bool> out_unknown(num_out, false);
  for (const ProgramPtr& b : branches) {
    const PartialEvalPrograms pe = partial_eval(*b, ops_known, std::vector<bool>(num_out, false));
    for (size_t j = 0; j < num_out; ++j) out_unknown[j] = out_unknown[j] || !pe.out_known[j];
  }
  if (std::all_of(out_unknown.begin(), out_unknown.end(), [](bool u) { return u; })) return std::nullopt;
  std::vector<PartialEvalPrograms> pes;
  EquationSplit split;
  std::vector<size_t> first_residual;  // of each branch, among all branches' residuals
  for (const ProgramPtr& b : branches) {
    pes.push_back(partial_eval(*b, ops_known, out_unknown));
    const Avals known_out = pes.back().known->out_avals();
    first_residual.push_back(split.residual_avals.size());
    split.residual_avals.insert(split.residual_avals.end(), known_out.end() - pes.back().num_residuals,
                                known_out.end());
  }
  for (bool u : out_unknown) split.out_known.push_back(!u);
  split.staged_reads.assign(in.size(), false);
  split.staged_reads[0] = true;  // the index
  Avals known_ops, unknown_ops;
  for (size_t i = 1; i < in.size(); ++i) (known_in[i] ? known_ops : unknown_ops).push_back(in[i]);
  const size_t num_known_out = num_out - std::count(out_unknown.begin(), out_unknown.end(), true);
  ProgramList known_branches, staged_branches;
  Avals staged_in = split.residual_avals;
  staged_in.insert(staged_in.end(), unknown_ops.begin(), unknown_ops.end());
  for (size_t b = 0; b < branches.size(); ++b) {
    const PartialEvalPrograms& pe = pes[b];
    known_branches.push_back(trace_program(known_ops, [&](const Values& args) {
      const Values out = eval_program(*pe.known, args);
      Values r(out.begin(), out.begin() + num_known_out);
      for (size_t k = 0; k < split.residual_avals.size(); ++k) {
        const bool own = k >= first_residual[b] && k < first_residual[b] + pe.num_residuals;
        const Aval& a = split.residual_avals[k];
        r.push_back(own ? out[num_known_out + k - first_residual[b]] : vary_over(ops::zeros(a), a.vma));
      }
      return r;
    }));
    staged_branches.push_back(trace_program(staged_in, [&](const Values& args) {
      Values own(args.begin() + first_residual[b], args.begin() + first_residual[b] + pe.num_residuals);
      own.insert(own.end(), args.begin() + split.residual_avals.size(), args.end());
      return eval_program(*pe.staged, own);
    }));
  }
  Params known_params = e.params, staged_params = e.params;
  known_params.set("branches", known_branches);
  staged_params.set("branches", staged_branches);
  split.known = [known_params](const Values& known_values) {
    return meshsim::bind(primitive("cond"), known_values, known_params);
  };
  split.staged = [staged_params](const Values& residuals, const Values& inputs) {
    Values operands{inputs[0]};  // the index, then the residuals and the unknown operands
    operands.insert(operands.end(), residuals.begin(), residuals.end());
    operands.insert(operands.end(), inputs.begin() + 1, inputs.end());
    return meshsim::bind(primitive("cond"), operands, staged_params);
  };
  return split;
}

// --- while -------------------------------------------------------------------
// while(*cond_consts, *body_consts, *carry; body_jaxpr, body_nconsts,
// cond_jaxpr, cond_nconsts).


Avals while_eval(const Avals& in, const Params& params) {
  const WhileParams w(params);
  if (in.size() < w.cond_nconsts + w.body_nconsts)
    fail<TypeError>("while takes ", w.cond_nconsts + w.body_nconsts, " constants, got ", in.size(), " operands");
  const size_t first = w.cond_nconsts + w.body_nconsts, num_carry = in.size() - first;
  Avals cond_in(in.begin(), in.begin() + w.cond_nconsts);
  cond_in.insert(cond_in.end(), in.begin() + first, in.end());
  check_call("while", "cond_jaxpr", *w.cond, cond_in, 0, cond_in.size());
  check_call("while", "body_jaxpr", *w.body, in, w.cond_nconsts, w.body_nconsts + num_carry);
  // A batched predicate (vmap of a loop whose predicate depends on the
  // example) has the batch dims that lead every carry's shape.
  const Avals pred = w.cond->out_avals();
  const auto leads = [&](const Aval& carry) {
    const Shape& p = pred[0].shape;
    return carry.shape.size() >= p.size() && std::equal(p.begin(), p.end(), carry.shape.begin());
  };
  if (pred.size() != 1 || pred[0].dtype != DType::Bool ||
      !std::all_of(in.begin() + first, in.end(), leads))
    fail<TypeError>("cond_fun must return a boolean scalar, but got output type(s) [",
                    pred.empty() ? "" : pred[0].str_short(), "]");
  const Avals out = w.body->out_avals();
  if (out.size() != num_carry)
    fail<TypeError>("while_loop body function carry input and carry output must have equal types");
  for (size_t j = 0; j < num_carry; ++j)
    if (!same_shape_dtype(out[j], in[first + j]) || out[j].vma != in[first + j].vma)
      fail<TypeError>("while_loop body function carry input and carry output must have equal types: "
                      "input ", j, " has type ", in[first + j].str_short(), ", output ",
                      out[j].str_short());
  return out;
}

// The known program's results `keep` picks among the program's outputs, its
// residuals dropped.
ProgramPtr known_results(const PartialEvalPrograms& pe, const std::vector<bool>& keep) {
  auto p = std::make_shared<Program>(*pe.known);
  std::vector<int> outvars;
  for (size_t j = 0, k = 0; j < pe.out_known.size(); ++j) {
    if (!pe.out_known[j]) continue;
    if (keep[j]) outvars.push_back(pe.known->outvars[k]);
    ++k;
  }
  p->outvars = std::move(outvars);
  dce(*p);
  return p;
}

// A while loop with some operands known (as JAX's while partial evaluation):
// the carries that stay known (a fixed point, as for scan) are known when the
// predicate reads only known values; a loop over them alone computes them,
// and the whole loop runs again for the others. Staged whole otherwise.
std::optional<EquationSplit> while_partial_eval(const Equation& e, const Avals& in, const std::vector<bool>& known_in) {
  const WhileParams w(e.params);
  const size_t first = w.cond_nconsts + w.body_nconsts, num_carry = in.size() - first;
  std::vector<bool> body_known(known_in.begin() + w.cond_nconsts, known_in.end());
  PartialEvalPrograms body;
  for (bool changed = true; changed;) {
    body = partial_eval(*w.body, body_known, std::vector<bool>(num_carry, false));
    changed = false;
    for (size_t j = 0; j < num_carry; ++j)
      if (body_known[w.body_nconsts + j] && !body.out_known[j]) body_known[w.body_nconsts + j] = !(changed = true);
  }
  const std::vector<bool> carry_known(body_known.begin() + w.body_nconsts, body_known.end());
  if (std::none_of(carry_known.begin(), carry_known.end(), [](bool k) { return k; })) return std::nullopt;
  std::vector<bool> cond_known(known_in.begin(), known_in.begin() + w.cond_nconsts);
  cond_known.insert(cond_known.end(), carry_known.begin(), carry_known.end());
  const PartialEvalPrograms pred = partial_eval(*w.cond, cond_known, {false});
  if (!pred.out_known[0]) return std::nullopt;

  EquationSplit split;
  split.out_known = carry_known;
  split.staged_reads.assign(in.size(), true);  // the whole loop runs again
  std::vector<bool> operand_known(in.size());  // operands of the known loop
  size_t num_cond_consts = 0, num_body_consts = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    operand_known[i] = i < w.cond_nconsts ? known_in[i] : body_known[i - w.cond_nconsts];
    if (operand_known[i] && i < w.cond_nconsts) ++num_cond_consts;
    if (operand_known[i] && i >= w.cond_nconsts && i < first) ++num_body_consts;
  }
  Params known_params = e.params;
  known_params.set("cond_jaxpr", known_results(pred, {true}));
  known_params.set("body_jaxpr", known_results(body, carry_known));
  known_params.set("cond_nconsts", static_cast<int64_t>(num_cond_consts));
  known_params.set("body_nconsts", static_cast<int64_t>(num_body_consts));
  split.known = [known_in, operand_known, known_params](const Values& known_values) {
    return meshsim::bind(primitive("while"), taken_operands(known_in, operand_known, known_values), known_params);
  };
  const Params params = e.params;
  split.staged = [params, carry_known](const Values&, const Values& inputs) {
    const Values out = meshsim::bind(primitive("while"), inputs, params);
    Values unknown;
    for (size_t j = 0; j < carry_known.size(); ++j)
      if (!carry_known[j]) unknown.push_back(out[j]);
    return unknown;
  };
  return split;
}

// `next` where `pred` holds and `carry` elsewhere: `pred`'s shape leads the
// carry's, each of its elements choosing a contiguous block.
Tensor select_leading(const Tensor& pred, Tensor next, const Tensor& carry) {
  const Tensor p = pred.contiguous();
  const bool* take = p.data<bool>();
  const int64_t m = p.size();
  if (std::all_of(take, take + m, [](bool b) { return b; })) return next;
  Tensor out = carry.copy();
  const Tensor n = next.contiguous();
  const size_t block = m ? out.nbytes() / m : 0;
  for (int64_t i = 0; i < m; ++i)
    if (take[i]) std::memcpy(static_cast<char*>(out.raw()) + i * block, static_cast<const char*>(n.raw()) + i * block, block);
  return out;
}

// Inside a shard_map the predicate may differ across devices, and a batched
// predicate (vmap) across examples: the loop runs while it holds anywhere, and
// a device or example whose predicate is false keeps its carry.
std::vector<Tensors> while_run(const Runner& run, std::vector<Tensors> in, const Params& params,
                               const Avals&) {
  const WhileParams w(params);
  const size_t first = w.cond_nconsts + w.body_nconsts, n = in.size();
  const std::vector<Tensors> cond_consts = take_devices(in, 0, w.cond_nconsts);
  const std::vector<Tensors> body_consts = take_devices(in, w.cond_nconsts, w.body_nconsts);
  std::vector<Tensors> carry = take_devices(in, first, in[0].size() - first);
  while (true) {
    std::vector<Tensors> cond_in = cond_consts;
    append_devices(cond_in, carry);
    const std::vector<Tensors> pred = run(w.cond, std::move(cond_in));
    std::vector<bool> going(n);
    bool any = false;
    for (size_t d = 0; d < n; ++d) {
      const Tensor p = pred[d][0].contiguous();
      any |= going[d] = std::any_of(p.data<bool>(), p.data<bool>() + p.size(), [](bool b) { return b; });
    }
    if (!any) return carry;
    std::vector<Tensors> body_in = body_consts;
    append_devices(body_in, carry);
    std::vector<Tensors> next = run(w.body, std::move(body_in));
    for (size_t d = 0; d < n; ++d) {
      if (!going[d]) continue;
      if (pred[d][0].ndim() == 0) {
        carry[d] = std::move(next[d]);
        continue;
      }
      for (size_t j = 0; j < carry[d].size(); ++j)
        carry[d][j] = select_leading(pred[d][0], std::move(next[d][j]), carry[d][j]);
    }
  }
}

// Sharding propagation over Auto axes: the body's factor map over its
// constants and carries, carried dims kept where the body gives them back
// laid out as they came; the predicate's constants are computed whole.
std::optional<FactorMap> while_factors(const Avals& in, const Params& params, const Avals& out) {
  const WhileParams w(params);
  const FactorMap body = program_factors(*w.body);
  const auto keep = carried_factors(body, w.body_nconsts, out.size());
  FactorMap m = blank_factors(in, out);
  m.num_factors = body.num_factors;
  for (size_t i = 0; i < body.in.size() && w.cond_nconsts + i < in.size(); ++i)
    for (size_t d = 0; d < body.in[i].size(); ++d) m.in[w.cond_nconsts + i][d] = keep(body.in[i][d]);
  for (size_t j = 0; j < out.size() && j < body.out.size(); ++j)
    for (size_t d = 0; d < body.out[j].size(); ++d) m.out[j][d] = keep(body.out[j][d]);
  return m;
}

// Shardy's propagation through the loop: the predicate and the body take
// their constants and the carries, the body gives the carries back.
std::optional<ControlFlowLinks> while_links(const Params& params) {
  const WhileParams w(params);
  const size_t first = w.cond_nconsts + w.body_nconsts, num_carry = w.body->outvars.size();
  auto links_of = [&](const ProgramPtr& p, size_t consts_at, size_t num_consts, bool gives_carries) {
    SubProgramLinks l{p, {}, {}, {}};
    for (size_t i = 0; i < num_consts; ++i) l.in_operand.push_back(consts_at + i), l.in_result.push_back(-1);
    for (size_t j = 0; j < num_carry; ++j) l.in_operand.push_back(first + j), l.in_result.push_back(j);
    for (size_t j = 0; j < p->outvars.size(); ++j) l.out_result.push_back(gives_carries ? static_cast<int>(j) : -1);
    return l;
  };
  ControlFlowLinks links;
  links.programs.push_back(links_of(w.cond, 0, w.cond_nconsts, false));
  links.programs.push_back(links_of(w.body, w.cond_nconsts, w.body_nconsts, true));
  return links;
}

// Each device loops on its own blocks when the predicate and the body, made
// local for the operands' layouts, need no communication (so every device
// computes the same predicate) and the body gives the carries back laid out
// as they came.
std::optional<LocalPlan> while_plan(const Avals& in, const Params& params, const Avals&) {
  const WhileParams w(params);
  const MeshPtr mesh = mesh_of(in);
  if (!mesh) return std::nullopt;
  const size_t first = w.cond_nconsts + w.body_nconsts, num_carry = in.size() - first;
  LocalPlan plan;
  plan.in_specs = specs_of(in, 0, in.size());
  const std::vector<Spec> carry = specs_of(in, first, num_carry);
  std::vector<Spec> cond_in = specs_of(in, 0, w.cond_nconsts), body_in = specs_of(in, w.cond_nconsts, w.body_nconsts);
  cond_in.insert(cond_in.end(), carry.begin(), carry.end());
  body_in.insert(body_in.end(), carry.begin(), carry.end());
  std::vector<Spec> pred, body_out;
  const std::optional<ProgramPtr> cond = local_program(*w.cond, mesh, cond_in, pred);
  const std::optional<ProgramPtr> body = local_program(*w.body, mesh, body_in, body_out);
  if (!cond || !body) return std::nullopt;
  for (size_t j = 0; j < num_carry; ++j)
    if (pad_spec(body_out[j], carry[j].size()) != carry[j]) return std::nullopt;
  plan.out_specs = carry;
  plan.params = params;
  plan.params.set("cond_jaxpr", *cond);
  plan.params.set("body_jaxpr", *body);
  return plan;
}

// --- scan --------------------------------------------------------------------
// scan(*consts, *init, *xs; jaxpr, length, num_carry, num_consts, reverse,
// unroll): the body maps (consts, carry, x[i]) to (carry, y[i]); results are
// the final carry and the stacked ys.


Aval stacked(Aval a, int64_t length) {
  a.shape.insert(a.shape.begin(), length);
  if (!a.spec.empty()) a.spec.insert(a.spec.begin(), AxisNames{});
  return a;
}

Avals scan_eval(const Avals& in, const Params& params) {
  const ScanParams s(params);
  if (s.length < 0) fail<ValueError>("scan length must be non-negative, got ", s.length);
  if (in.size() < s.num_consts + s.num_carry)
    fail<TypeError>("scan takes ", s.num_consts, " constants and ", s.num_carry, " carries, got ",
                    in.size(), " operands");
  Avals body_in(in.begin(), in.begin() + s.num_consts + s.num_carry);
  for (size_t i = s.num_consts + s.num_carry; i < in.size(); ++i) {
    if (in[i].shape.empty() || in[i].shape[0] != s.length)
      fail<ValueError>("scan got value with leading axis size ",
                       in[i].shape.empty() ? std::string("()") : std::to_string(in[i].shape[0]),
                       " but length=", s.length);
    if (in[i].mesh && !explicit_part(in[i].spec, *in[i].mesh, in[i].shape.size())[0].empty())
      fail<ValueError>("0th dimension of all xs should be replicated. Got ",
                       spec_repr(explicit_part(in[i].spec, *in[i].mesh, in[i].shape.size())));
    Aval x = in[i];
    x.shape.erase(x.shape.begin());
    if (!x.spec.empty()) x.spec.erase(x.spec.begin());
    body_in.push_back(std::move(x));
  }
  check_call("scan", "body", *s.body, body_in, 0, body_in.size());
  const Avals body_out = s.body->out_avals();
  if (body_out.size() < s.num_carry)
    fail<TypeError>("scan body returns ", body_out.size(), " outputs, fewer than its ", s.num_carry, " carries");
  Avals out;
  for (size_t j = 0; j < body_out.size(); ++j) {
    if (j < s.num_carry) {
      const Aval& c = in[s.num_consts + j];
      if (!same_shape_dtype(body_out[j], c) || body_out[j].vma != c.vma)
        fail<TypeError>("scan body function carry input and carry output must have equal types: "
                        "input ", j, " has type ", c.str_short(), ", output ", body_out[j].str_short());
      out.push_back(body_out[j]);
    } else {
      out.push_back(stacked(body_out[j], s.length));
    }
  }
  return out;
}

// The rows x[i] of a scanned operand or stacked result: their shape and
// strides are worked out once per loop, not per iteration (a Tensor's shape
// and strides are heap vectors; building them per row per iteration cost as
// much as the loop's small equations).
class Rows {
 public:
  explicit Rows(const Tensor& x)
      : x_(x), shape_(x.shape().begin() + 1, x.shape().end()),
        strides_(x.strides().begin() + 1, x.strides().end()) {}
  Tensor operator[](int64_t i) const { return x_.view(shape_, strides_, i * x_.strides()[0]); }
  // Writes `row` into row i: one memcpy when both are contiguous (a stacked
  // result always is), with no view made for it.
  void assign(int64_t i, const Tensor& row) const {
    if (x_.is_contiguous() && row.is_contiguous()) {
      const size_t bytes = row.nbytes();
      if (bytes) std::memcpy(static_cast<char*>(x_.raw()) + i * bytes, row.raw(), bytes);
    } else {
      copy_into(row, (*this)[i]);
    }
  }

 private:
  const Tensor& x_;
  Shape shape_;
  Strides strides_;
};

std::vector<Tensors> scan_run(const Runner& run, std::vector<Tensors> in, const Params& params,
                              const Avals& out_avals) {
  const ScanParams s(params);
  const size_t n = in.size(), num_xs = in[0].size() - s.num_consts - s.num_carry;
  const size_t num_ys = out_avals.size() - s.num_carry;
  std::vector<Tensors> carry = take_devices(in, s.num_consts, s.num_carry);
  std::vector<Tensors> ys(n);
  for (size_t d = 0; d < n; ++d)
    for (size_t j = 0; j < num_ys; ++j)
      ys[d].push_back(Tensor::empty(out_avals[s.num_carry + j].dtype, out_avals[s.num_carry + j].shape));
  std::vector<std::vector<Rows>> x_rows(n), y_rows(n);
  for (size_t d = 0; d < n; ++d) {
    x_rows[d].reserve(num_xs);
    for (size_t k = 0; k < num_xs; ++k) x_rows[d].emplace_back(in[d][s.num_consts + s.num_carry + k]);
    y_rows[d].reserve(num_ys);
    for (size_t j = 0; j < num_ys; ++j) y_rows[d].emplace_back(ys[d][j]);
  }
  for (int64_t t = 0; t < s.length; ++t) {
    const int64_t i = s.reverse ? s.length - 1 - t : t;
    std::vector<Tensors> args(n);
    for (size_t d = 0; d < n; ++d) {
      // The carry moves into the body (its last read there may move it on),
      // and so do the constants in the last iteration.
      Tensors& a = args[d];
      a.reserve(in[d].size());
      if (t + 1 == s.length)
        a.insert(a.end(), std::make_move_iterator(in[d].begin()), std::make_move_iterator(in[d].begin() + s.num_consts));
      else
        a.insert(a.end(), in[d].begin(), in[d].begin() + s.num_consts);
      for (Tensor& c : carry[d]) a.push_back(std::move(c));
      for (size_t k = 0; k < num_xs; ++k) a.push_back(x_rows[d][k][i]);
    }
    std::vector<Tensors> res = run(s.body, std::move(args));
    for (size_t d = 0; d < n; ++d) {
      for (size_t j = 0; j < s.num_carry; ++j) carry[d][j] = std::move(res[d][j]);
      for (size_t j = 0; j < num_ys; ++j) y_rows[d][j].assign(i, res[d][s.num_carry + j]);
    }
  }
  for (size_t d = 0; d < n; ++d)  // the stacked results move on after the carries
    for (Tensor& y : ys[d]) carry[d].push_back(std::move(y));
  return carry;
}

// Sharding propagation over Auto axes: the body's factor map (what each
// device can compute on its blocks alone), the scanned leading dims of xs
// and ys computed whole; a carry's dim keeps its factor only where the body
// gives the carry back laid out as it came.
std::optional<FactorMap> scan_factors(const Avals& in, const Params& params, const Avals& out) {
  const ScanParams s(params);
  const FactorMap body = program_factors(*s.body);
  const auto keep = carried_factors(body, s.num_consts, s.num_carry);
  FactorMap m = blank_factors(in, out);
  m.num_factors = body.num_factors;
  const size_t fixed = s.num_consts + s.num_carry;
  for (size_t i = 0; i < in.size() && i < body.in.size(); ++i)
    for (size_t d = 0; d < body.in[i].size(); ++d) m.in[i][i < fixed ? d : d + 1] = keep(body.in[i][d]);
  for (size_t j = 0; j < out.size() && j < body.out.size(); ++j)
    for (size_t d = 0; d < body.out[j].size(); ++d)
      m.out[j][j < s.num_carry ? d : d + 1] = keep(body.out[j][d]);
  return m;
}

// Shardy's propagation through the loop: the body takes the constants, the
// carries and a row of each xs, and gives the carries back and a row of each ys.
std::optional<ControlFlowLinks> scan_links(const Params& params) {
  const ScanParams s(params);
  SubProgramLinks l{s.body, {}, {}, {}};
  for (size_t i = 0; i < s.body->invars.size(); ++i) {
    l.in_operand.push_back(static_cast<int>(i));
    const bool carried = i >= s.num_consts && i < s.num_consts + s.num_carry;
    l.in_result.push_back(carried ? static_cast<int>(i - s.num_consts) : -1);
  }
  for (size_t j = 0; j < s.body->outvars.size(); ++j) l.out_result.push_back(static_cast<int>(j));
  const int64_t unroll = params.has("unroll") ? std::max<int64_t>(params.get<int64_t>("unroll"), 1) : 1;
  l.copies = unroll >= s.length ? s.length : unroll + s.length % unroll;
  ControlFlowLinks links;
  links.programs.push_back(std::move(l));
  links.stacked_operands = s.num_consts + s.num_carry;
  links.stacked_results = s.num_carry;
  return links;
}

// Each device scans its own blocks when the body needs no communication laid
// out as the operands are (the scanned leading dims whole): the body made
// local (sharding/propagation.h local_program).
std::optional<LocalPlan> scan_plan(const Avals& in, const Params& params, const Avals&) {
  const ScanParams s(params);
  const MeshPtr mesh = mesh_of(in);
  if (!mesh) return std::nullopt;
  const size_t fixed = s.num_consts + s.num_carry;
  LocalPlan plan;
  std::vector<Spec> body_in, body_out;
  for (size_t i = 0; i < in.size(); ++i) {
    Spec spec = spec_of(in[i]);
    plan.in_specs.push_back(spec);
    if (i >= fixed) {
      if (!spec[0].empty()) return std::nullopt;
      spec.erase(spec.begin());
    }
    body_in.push_back(std::move(spec));
  }
  const std::optional<ProgramPtr> body = local_program(*s.body, mesh, body_in, body_out);
  if (!body) return std::nullopt;
  for (size_t j = 0; j < body_out.size(); ++j) {
    if (j < s.num_carry) {
      if (pad_spec(body_out[j], body_in[s.num_consts + j].size()) != body_in[s.num_consts + j])
        return std::nullopt;
      plan.out_specs.push_back(body_out[j]);
    } else {
      Spec stacked_spec = body_out[j];
      stacked_spec.insert(stacked_spec.begin(), AxisNames{});
      plan.out_specs.push_back(std::move(stacked_spec));
    }
  }
  plan.params = params;
  plan.params.set("jaxpr", *body);
  return plan;
}

// A scan with some operands known splits into a known scan and a staged one,
// as JAX's scan partial evaluation does. Which carries stay known is a fixed
// point: a carry is known when its initial value is and the body gives it
// back known from the known inputs. The known scan runs the body's known part
// and stacks its residuals as extra ys; the staged scan runs the rest on
// them. A residual that is a known constant or a row of a known xs is not
// stacked: the staged scan reads that operand itself. Staged whole when no
// result would be known.
std::optional<EquationSplit> scan_partial_eval(const Equation& e, const Avals& in, const std::vector<bool>& known_in) {
  const ScanParams s(e.params);
  const size_t num_in = in.size(), num_out = s.body->outvars.size();
  const size_t first_x = s.num_consts + s.num_carry;
  std::vector<bool> body_known = known_in;
  PartialEvalPrograms pe;
  for (bool changed = true; changed;) {
    std::vector<bool> instantiate(num_out, false);
    for (size_t j = 0; j < s.num_carry; ++j) instantiate[j] = !body_known[s.num_consts + j];
    pe = partial_eval(*s.body, body_known, instantiate);
    changed = false;
    for (size_t j = 0; j < s.num_carry; ++j)
      if (body_known[s.num_consts + j] && !pe.out_known[j]) body_known[s.num_consts + j] = !(changed = true);
  }
  size_t num_known_out = 0;
  for (bool k : pe.out_known) num_known_out += k;
  if (num_known_out == 0) return std::nullopt;

  EquationSplit split;
  split.out_known = pe.out_known;
  split.staged_reads.assign(num_in, false);
  for (size_t j = 0; j < s.num_carry; ++j)  // a known initial value of a carry the staged scan carries
    split.staged_reads[s.num_consts + j] = known_in[s.num_consts + j] && !body_known[s.num_consts + j];
  // The known body's inputs are the known operands in order; a residual it
  // passes through from one of them is a forwarded operand.
  std::vector<size_t> known_operands;
  for (size_t i = 0; i < num_in; ++i)
    if (body_known[i]) known_operands.push_back(i);
  Program known_body = *pe.known;
  std::vector<int> known_outvars(known_body.outvars.begin(), known_body.outvars.begin() + num_known_out);
  std::vector<int> res_consts, res_stacked, res_xs;  // the staged body's residual invars by kind
  std::vector<size_t> forwarded_consts, forwarded_xs;  // operand indices
  const Program& staged_body = *pe.staged;
  for (int q = 0; q < pe.num_residuals; ++q) {
    const int v = known_body.outvars[num_known_out + q];
    const int staged_var = staged_body.invars[q];
    const auto at = std::find(known_body.invars.begin(), known_body.invars.end(), v);
    const size_t operand = at == known_body.invars.end() ? num_in : known_operands[at - known_body.invars.begin()];
    if (operand < s.num_consts || (operand >= first_x && operand < num_in)) {
      split.staged_reads[operand] = true;
      (operand < s.num_consts ? forwarded_consts : forwarded_xs).push_back(operand);
      (operand < s.num_consts ? res_consts : res_xs).push_back(staged_var);
      continue;
    }
    known_outvars.push_back(v);
    res_stacked.push_back(staged_var);
    split.residual_avals.push_back(stacked(known_body.avals[v], s.length));
  }
  known_body.outvars = std::move(known_outvars);

  // The staged body takes (forwarded constants, unknown constants, unknown
  // carries, stacked residuals, forwarded xs, unknown xs).
  Program staged = staged_body;
  staged.invars = res_consts;
  std::vector<int> staged_xs = res_stacked;
  staged_xs.insert(staged_xs.end(), res_xs.begin(), res_xs.end());
  size_t num_staged_consts = res_consts.size(), num_staged_carry = 0;
  for (size_t i = 0, a = pe.num_residuals; i < num_in; ++i) {
    if (body_known[i]) continue;
    const int v = staged_body.invars[a++];
    if (i < s.num_consts) {
      staged.invars.push_back(v);
      ++num_staged_consts;
    } else if (i < first_x) {
      staged.invars.push_back(v);
      ++num_staged_carry;
    } else {
      staged_xs.push_back(v);
    }
  }
  staged.invars.insert(staged.invars.end(), staged_xs.begin(), staged_xs.end());

  size_t num_known_consts = 0, num_known_carry = 0;
  for (size_t i = 0; i < first_x; ++i)
    if (body_known[i]) ++(i < s.num_consts ? num_known_consts : num_known_carry);
  Params known_params = e.params;
  known_params.set("jaxpr", std::make_shared<Program>(std::move(known_body)));
  known_params.set("num_consts", static_cast<int64_t>(num_known_consts));
  known_params.set("num_carry", static_cast<int64_t>(num_known_carry));
  Params staged_params = e.params;
  staged_params.set("jaxpr", std::make_shared<Program>(std::move(staged)));
  staged_params.set("num_consts", static_cast<int64_t>(num_staged_consts));
  staged_params.set("num_carry", static_cast<int64_t>(num_staged_carry));

  split.known = [known_in, body_known, known_params](const Values& known_values) {
    return meshsim::bind(primitive("scan"), taken_operands(known_in, body_known, known_values), known_params);
  };
  const std::vector<bool> reads = split.staged_reads;
  split.staged = [known_in, body_known, reads, forwarded_consts, forwarded_xs, first_x, staged_params](const Values& residuals, const Values& inputs) {
    // `inputs` holds operand i when it is unknown or read; find each by index.
    std::vector<const Value*> operand(known_in.size(), nullptr);
    for (size_t i = 0, a = 0; i < known_in.size(); ++i)
      if (!known_in[i] || reads[i]) operand[i] = &inputs[a++];
    Values operands;
    for (size_t i : forwarded_consts) operands.push_back(*operand[i]);
    for (size_t i = 0; i < first_x; ++i)
      if (!body_known[i]) operands.push_back(*operand[i]);
    operands.insert(operands.end(), residuals.begin(), residuals.end());
    for (size_t i : forwarded_xs) operands.push_back(*operand[i]);
    for (size_t i = first_x; i < known_in.size(); ++i)
      if (!body_known[i]) operands.push_back(*operand[i]);
    return meshsim::bind(primitive("scan"), operands, staged_params);
  };
  return split;
}

// Where the backward scan finds each residual of the body's forward program.
struct ScanResiduals {
  enum Kind { Invariant, Forwarded, Stacked };
  std::vector<Kind> kind;
  std::vector<size_t> index;  // into `invariant`, the xs or `stacked`
  Values invariant;           // computed once from the constants: the backward scan's constants
  Values stacked;             // one row per iteration: the forward scan's extra ys
};

// The forward scan of `split`'s forward program. What depends only on the
// constants is computed once before the loop (as JAX's scan partial
// evaluation hoists it): loop-invariant residuals, such as a weight's cast,
// become constants of the backward scan instead of being stacked per
// iteration; residuals that are rows of an xs are read from that xs.
Values scan_forward(const VjpPrograms& split, const Values& in, const ScanParams& s,
                    const Params& params, ScanResiduals& res) {
  const Program& fwd = *split.fwd;
  const size_t num_in = in.size(), num_out = fwd.outvars.size() - split.num_residuals;
  std::vector<bool> known_in(num_in, false), instantiate(fwd.outvars.size(), false);
  std::fill(known_in.begin(), known_in.begin() + s.num_consts, true);
  std::fill(instantiate.begin(), instantiate.begin() + num_out, true);
  const PartialEvalPrograms pe = partial_eval(fwd, known_in, instantiate);
  const Values hoisted = eval_program(*pe.known, Values(in.begin(), in.begin() + s.num_consts));
  size_t num_invariant = 0;
  for (bool k : pe.out_known) num_invariant += k;
  res.invariant.assign(hoisted.begin(), hoisted.begin() + num_invariant);

  // The loop: (hoisted values, carries, xs) -> (outputs, residuals that vary).
  Program loop = *pe.staged;
  const size_t first_x = pe.num_residuals + s.num_carry;
  std::vector<int> loop_outvars(loop.outvars.begin(), loop.outvars.begin() + num_out);
  size_t staged_out = num_out, invariant = 0;
  for (int q = 0; q < split.num_residuals; ++q) {
    if (pe.out_known[num_out + q]) {
      res.kind.push_back(ScanResiduals::Invariant);
      res.index.push_back(invariant++);
      continue;
    }
    const int v = loop.outvars[staged_out++];
    const auto x = std::find(loop.invars.begin() + first_x, loop.invars.end(), v);
    if (x != loop.invars.end()) {
      res.kind.push_back(ScanResiduals::Forwarded);
      res.index.push_back(s.num_consts + s.num_carry + (x - loop.invars.begin() - first_x));
    } else {
      res.kind.push_back(ScanResiduals::Stacked);
      res.index.push_back(loop_outvars.size() - num_out);
      loop_outvars.push_back(v);
    }
  }
  loop.outvars = std::move(loop_outvars);
  Values operands(hoisted.begin() + num_invariant, hoisted.end());
  operands.insert(operands.end(), in.begin() + s.num_consts, in.end());
  Params fwd_params = params;
  fwd_params.set("jaxpr", std::make_shared<Program>(std::move(loop)));
  fwd_params.set("num_consts", static_cast<int64_t>(pe.num_residuals));
  const Values fwd_out = meshsim::bind(primitive("scan"), operands, fwd_params);
  res.stacked.assign(fwd_out.begin() + num_out, fwd_out.end());
  return Values(fwd_out.begin(), fwd_out.begin() + num_out);
}

// Reverse mode: the body is split by vjp_program; a forward scan of its
// forward program also returns the residuals that vary by iteration (stacked
// as extra ys), and a backward scan in the opposite direction runs its
// backward program on them and the loop-invariant ones (its constants),
// carrying the carries' cotangents and summing the constants'.
VjpSplit scan_vjp(const Values& in, const std::vector<bool>& active, const Params& params) {
  const ScanParams s(params);
  const size_t num_in = in.size(), num_xs = num_in - s.num_consts - s.num_carry;
  const size_t num_out = s.body->outvars.size(), num_ys = num_out - s.num_carry;
  // A carry is differentiated when anything is (its initial value or what
  // flows into it); over-approximating only costs zeros.
  bool any = false;
  for (bool a : active) any |= a;
  std::vector<bool> wrt = active;
  const Avals body_in = s.body->in_avals();
  for (size_t j = 0; j < s.num_carry; ++j)
    wrt[s.num_consts + j] = any && is_inexact(body_in[s.num_consts + j].dtype);
  auto split = std::make_shared<VjpPrograms>(vjp_program(*s.body, wrt, std::vector<bool>(num_out, true)));
  auto res = std::make_shared<ScanResiduals>();
  const Values outs = scan_forward(*split, in, s, params, *res);
  Avals in_avals, out_avals;
  for (const Value& v : in) in_avals.push_back(aval_of(v));
  for (const Value& v : outs) out_avals.push_back(aval_of(v));

  auto backward = [=](const Cotangents& ct) {
    const std::vector<bool>& ct_in = split->ct_in;
    const std::vector<bool>& ct_out = split->ct_out;
    std::vector<size_t> acc_consts, carries, ct_ys, ct_xs;
    for (size_t i = 0; i < s.num_consts; ++i) if (ct_out[i]) acc_consts.push_back(i);
    for (size_t j = 0; j < s.num_carry; ++j)
      if (ct_in[j] || ct_out[s.num_consts + j]) carries.push_back(j);
    for (size_t j = 0; j < num_ys; ++j) if (ct_in[s.num_carry + j]) ct_ys.push_back(j);
    for (size_t k = 0; k < num_xs; ++k) if (ct_out[s.num_consts + s.num_carry + k]) ct_xs.push_back(k);
    // Backward scan operands: constants (loop-invariant residuals), carries
    // (constants' cotangent sums, carries' cotangents), then xs (ys'
    // cotangents, stacked residuals, xs read as residuals).
    std::vector<size_t> forwarded;
    for (size_t q = 0; q < res->kind.size(); ++q)
      if (res->kind[q] == ScanResiduals::Forwarded) forwarded.push_back(q);
    Values operands = res->invariant;
    for (size_t i : acc_consts) operands.push_back(ops::zeros(in_avals[i]));
    for (size_t j : carries)
      operands.push_back(vary_over(ops::instantiate(ct[j], out_avals[j]), out_avals[j].vma));
    for (size_t j : ct_ys) {
      const Aval& a = out_avals[s.num_carry + j];
      operands.push_back(vary_over(ops::instantiate(ct[s.num_carry + j], a), a.vma));
    }
    operands.insert(operands.end(), res->stacked.begin(), res->stacked.end());
    for (size_t q : forwarded) operands.push_back(in[res->index[q]]);
    const size_t num_bwd_consts = res->invariant.size();
    const size_t num_bwd_carry = acc_consts.size() + carries.size();
    const size_t first_x = num_bwd_consts + num_bwd_carry;
    Avals bwd_in;
    for (size_t k = 0; k < operands.size(); ++k) {
      Aval a = aval_of(operands[k]);
      if (k >= first_x) {  // one iteration's slice
        a.shape.erase(a.shape.begin());
        if (!a.spec.empty()) a.spec.erase(a.spec.begin());
      }
      bwd_in.push_back(std::move(a));
    }
    const Avals body_in_avals = s.body->in_avals();
    ProgramPtr bwd = trace_program(bwd_in, [&](const Values& args) {
      Values bargs;
      for (size_t c = 0; c < carries.size(); ++c)
        if (ct_in[carries[c]]) bargs.push_back(args[num_bwd_consts + acc_consts.size() + c]);
      for (size_t k = 0; k < ct_ys.size(); ++k) bargs.push_back(args[first_x + k]);
      // The residuals in the order the backward program takes them.
      const size_t first_stacked = first_x + ct_ys.size();
      const size_t first_forwarded = first_stacked + res->stacked.size();
      for (size_t q = 0, f = 0; q < res->kind.size(); ++q) {
        switch (res->kind[q]) {
          case ScanResiduals::Invariant: bargs.push_back(args[res->index[q]]); break;
          case ScanResiduals::Stacked: bargs.push_back(args[first_stacked + res->index[q]]); break;
          case ScanResiduals::Forwarded: bargs.push_back(args[first_forwarded + f++]); break;
        }
      }
      const Values cts = eval_program(*split->bwd, bargs);
      // The cotangent of body input i (zeros when the backward program gives none).
      auto ct_of = [&](size_t i) -> Value {
        if (!ct_out[i]) return ops::zeros(body_in_avals[i]);
        size_t pos = 0;
        for (size_t q = 0; q < i; ++q) pos += ct_out[q];
        return vary_over(cts[pos], body_in_avals[i].vma);
      };
      Values r;
      for (size_t c = 0; c < acc_consts.size(); ++c)
        r.push_back(ops::add_any(args[num_bwd_consts + c], ct_of(acc_consts[c])));
      for (size_t j : carries) r.push_back(ct_of(s.num_consts + j));
      for (size_t k : ct_xs) r.push_back(ct_of(s.num_consts + s.num_carry + k));
      return r;
    });
    Params bwd_params = params;
    bwd_params.set("jaxpr", bwd);
    bwd_params.set("num_consts", static_cast<int64_t>(num_bwd_consts));
    bwd_params.set("num_carry", static_cast<int64_t>(num_bwd_carry));
    bwd_params.set("reverse", !s.reverse);
    const Values out = meshsim::bind(primitive("scan"), operands, bwd_params);
    Cotangents result(num_in);
    for (size_t c = 0; c < acc_consts.size(); ++c) result[acc_consts[c]] = out[c];
    for (size_t c = 0; c < carries.size(); ++c)
      if (ct_out[s.num_consts + carries[c]]) result[s.num_consts + carries[c]] = out[acc_consts.size() + c];
    for (size_t k = 0; k < ct_xs.size(); ++k)
      result[s.num_consts + s.num_carry + ct_xs[k]] = out[num_bwd_carry + k];
    for (size_t i = 0; i < num_in; ++i)
      if (!active[i]) result[i] = std::nullopt;
    return result;
  };
  return VjpSplit{outs, backward};
}

}  // namespace

void register_control_flow_primitives() {
  Primitive cond;
  cond.name = "cond";
  cond.operands = at_least(0);  // cond_eval refuses a missing index with JAX's text
  cond.kind = Kind::ControlFlow;
  cond.vma_from_abstract_eval = true;
  cond.abstract_eval = cond_eval;
  set_runners(cond, cond_run);
  cond.vjp_split = cond_vjp;
  cond.factors = cond_factors;
  cond.local_plan = cond_plan;
  cond.sharding_rule = sub_program_specs;
  cond.batch = cond_batch;
  cond.sub_program_links = cond_links;
  register_primitive(std::move(cond));
  register_partial_eval_rule("cond", cond_partial_eval);

  Primitive loop;
  loop.name = "while";
  loop.operands = at_least(0);  // as many as its programs' inputs (while_eval checks them)
  loop.sub_program_params = {"cond_jaxpr", "body_jaxpr"};
  loop.kind = Kind::ControlFlow;
  loop.vma_from_abstract_eval = true;
  loop.abstract_eval = while_eval;
  set_runners(loop, while_run);
  loop.factors = while_factors;
  loop.local_plan = while_plan;
  loop.sharding_rule = sub_program_specs;
  loop.batch = while_batch;
  loop.vjp = [](const VjpArgs&) -> Cotangents {
    fail<ValueError>("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
                     "with dynamic start/stop values. Try using lax.scan, or using fori_loop with "
                     "static start/stop.");
  };
  loop.sub_program_links = while_links;
  register_primitive(std::move(loop));
  register_partial_eval_rule("while", while_partial_eval);

  Primitive scan;
  scan.name = "scan";
  scan.operands = at_least(0);  // as many as its body's inputs (scan_eval checks them)
  scan.sub_program_params = {"jaxpr"};
  scan.kind = Kind::ControlFlow;
  scan.vma_from_abstract_eval = true;
  scan.abstract_eval = scan_eval;
  set_runners(scan, scan_run);
  scan.vjp_split = scan_vjp;
  scan.factors = scan_factors;
  scan.local_plan = scan_plan;
  scan.sharding_rule = sub_program_specs;
  scan.batch = scan_batch;
  scan.sub_program_links = scan_links;
  register_primitive(std::move(scan));
  register_partial_eval_rule("scan", scan_partial_eval);
}

}  // namespace meshsim
