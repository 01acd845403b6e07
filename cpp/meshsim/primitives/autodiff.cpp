// Autodiff primitives: checkpointed regions (JAX's remat2), custom JVPs and VJPs, linear
// calls declared with their transpose, stop_gradient, checkpoint_name and
// optimization_barrier. The first four hold sub-programs and supply their own `vjp_split`
// (see transforms/vjp.h).
#include <algorithm>
#include <optional>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/printing.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/program_calls.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/sharding/propagation.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

// remat2(*args; jaxpr, prevent_cse, differentiated, policy): runs `jaxpr`;
// under differentiation only what `policy` saves is kept for the backward
// pass (None: nothing but the inputs), the rest is recomputed there.
void remat() {
  Primitive p = program_call("remat2", "jaxpr");
  p.vjp_split = [](const Values& in, const std::vector<bool>& active, const Params& params) {
    const std::string policy = params.is_none("policy") ? "" : params.get<std::string>("policy");
    return linearize(*params.get<ProgramPtr>("jaxpr"), in, active, policy);
  };
  p.batch = [](const BatchArgs& a) {
    const std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    Params params = a.params;
    params.set("jaxpr", batch_program(*a.params.get<ProgramPtr>("jaxpr"), batched, a.size));
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    return Batched{out, BatchDims(out.size(), 0)};
  };
  register_primitive(std::move(p));
  register_partial_eval_rule("remat2", call_partial_eval_rule("jaxpr", true));
}

// What custom_vjp_call and custom_jvp_call share: they run the program in their param
// `call_jaxpr` on their leading operands (its inputs); the rules' consts come after.
Primitive custom_call(const char* name) {
  Primitive p;
  p.name = name;
  p.operands = at_least(0);  // as many as its programs' inputs (call_avals checks them)
  p.sub_program_params = {"call_jaxpr"};
  p.factors = call_factors("call_jaxpr");
  p.local_plan = call_plan("call_jaxpr");
  p.sharding_rule = sub_program_specs;
  p.kind = Kind::HigherOrder;
  p.vma_from_abstract_eval = true;
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    const Program& call = *params.get<ProgramPtr>("call_jaxpr");
    return call_avals(name, call, in, 0, call.invars.size());
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    const ProgramPtr call = params.get<ProgramPtr>("call_jaxpr");
    return run_program(call, Tensors(in.begin(), in.begin() + call->invars.size()));
  };
  p.mesh_call = [](const MeshContext& mesh, const std::vector<Tensors>& in, const Params& params,
                   const Avals&) {
    const ProgramPtr call = params.get<ProgramPtr>("call_jaxpr");
    std::vector<Tensors> args;
    for (const Tensors& device_in : in)
      args.emplace_back(device_in.begin(), device_in.begin() + call->invars.size());
    return run_on_mesh(call, mesh, std::move(args));
  };
  return p;
}

// custom_vjp_call(*args, *consts; call_jaxpr, fwd_jaxpr, bwd_jaxpr, ...):
// `consts` are the values the three functions closed over, in that order
// (num_call_consts, num_fwd_consts, the rest for bwd). fwd_jaxpr returns the
// outputs then the residuals; bwd_jaxpr maps (residuals, output cotangents)
// to one cotangent per arg.
struct CustomVjp {
  ProgramPtr call, fwd, bwd;
  size_t num_args, call_consts, fwd_consts;
  explicit CustomVjp(const Params& p)
      : call(p.get<ProgramPtr>("call_jaxpr")),
        fwd(p.get<ProgramPtr>("fwd_jaxpr")),
        bwd(p.get<ProgramPtr>("bwd_jaxpr")),
        num_args(p.get<int64_t>("num_args")),
        call_consts(p.get<int64_t>("num_call_consts")),
        fwd_consts(p.get<int64_t>("num_fwd_consts")) {}
};

void custom_vjp_call() {
  Primitive p = custom_call("custom_vjp_call");
  p.vjp_split = [](const Values& in, const std::vector<bool>&, const Params& params) {
    const CustomVjp c(params);
    Values fwd_in(in.begin(), in.begin() + c.num_args);
    const auto consts = in.begin() + c.num_args + c.call_consts;
    fwd_in.insert(fwd_in.end(), consts, consts + c.fwd_consts);
    Values outs = eval_program(*c.fwd, fwd_in);
    const size_t num_out = c.call->outvars.size();
    Values res(outs.begin() + num_out, outs.end());
    outs.resize(num_out);
    const Values bwd_consts(consts + c.fwd_consts, in.end());
    const Avals out_avals = c.call->out_avals();
    auto backward = [c, res, bwd_consts, out_avals, n = in.size()](const Cotangents& ct) {
      Values args = res;
      for (size_t j = 0; j < ct.size(); ++j) args.push_back(ops::instantiate(ct[j], out_avals[j]));
      args.insert(args.end(), bwd_consts.begin(), bwd_consts.end());
      const Values arg_ct = eval_program(*c.bwd, args);
      Cotangents result(n);
      for (size_t i = 0; i < c.num_args; ++i) result[i] = arg_ct[i];
      return result;
    };
    return VjpSplit{outs, backward};
  };
  // Every argument is batched (its cotangent will be); constants keep theirs.
  p.batch = [](const BatchArgs& a) {
    const CustomVjp c(a.params);
    const size_t n_res = c.fwd->outvars.size() - c.call->outvars.size();
    const size_t bwd_first = c.num_args + c.call_consts + c.fwd_consts;
    std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    std::fill(batched.begin(), batched.begin() + c.num_args, true);
    auto flags = [&](size_t lead, size_t first, size_t count) {
      std::vector<bool> f(lead, true);
      for (size_t i = first; i < first + count; ++i) f.push_back(batched[i]);
      return f;
    };
    Params params = a.params;
    params.set("call_jaxpr", batch_program(*c.call, flags(c.num_args, c.num_args, c.call_consts), a.size));
    params.set("fwd_jaxpr",
               batch_program(*c.fwd, flags(c.num_args, c.num_args + c.call_consts, c.fwd_consts), a.size));
    params.set("bwd_jaxpr", batch_program(*c.bwd, flags(n_res + c.call->outvars.size(), bwd_first,
                                                         a.in.size() - bwd_first), a.size));
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    return Batched{out, BatchDims(out.size(), 0)};
  };
  register_primitive(std::move(p));
}

// custom_jvp_call(*consts, *args, *rule_consts; call_jaxpr, jvp_jaxpr, jvp_name, num_consts,
// symbolic_zeros, name): runs `call_jaxpr` on the consts it closed over and the args.
// `jvp_jaxpr` is the rule: (consts, args, their tangents, the other values the rule closed
// over) -> (outputs, their tangents). Differentiated, the rule replaces the function, as in
// JAX's JVP of the primitive: its primal part runs in place of the call (so that what it
// binds, a call of the function itself included, is recorded as JAX records it), with the
// tangents of the args not differentiated as known zeros; the backward pass is the
// transpose of the part that reads the other tangents.
struct CustomJvp {
  ProgramPtr call, jvp;
  size_t num_consts, num_args;
  explicit CustomJvp(const Params& p)
      : call(p.get<ProgramPtr>("call_jaxpr")),
        jvp(p.get<ProgramPtr>("jvp_jaxpr")),
        num_consts(p.get<int64_t>("num_consts")),
        num_args(call->invars.size() - num_consts) {}
};

VjpSplit custom_jvp_vjp_split(const Values& in, const std::vector<bool>& active, const Params& params) {
  const CustomJvp c(params);
  const size_t num_out = c.call->outvars.size(), first_tangent = c.num_consts + c.num_args;
  const Program& rule = *c.jvp;
  // The rule's known inputs, in its order: everything but the differentiated args' tangents.
  std::vector<bool> known_in(rule.invars.size(), true);
  Values known_args(in.begin(), in.begin() + first_tangent);
  for (size_t i = 0; i < c.num_args; ++i) {
    const size_t arg = c.num_consts + i;
    known_in[first_tangent + i] = !(active[arg] && is_inexact(aval_of(in[arg]).dtype));
    if (known_in[first_tangent + i]) known_args.push_back(ops::zeros(rule.avals[rule.invars[first_tangent + i]]));
  }
  known_args.insert(known_args.end(), in.begin() + first_tangent, in.end());
  std::vector<bool> instantiate(2 * num_out, true);
  std::fill(instantiate.begin(), instantiate.begin() + num_out, false);
  auto pe = std::make_shared<PartialEvalPrograms>(partial_eval(rule, known_in, instantiate));
  for (size_t j = 0; j < num_out; ++j)
    if (!pe->out_known[j])
      fail<TypeError>("the custom_jvp rule of '", params.get<std::string>("name"),
                      "' computes its primal output from the tangents");
  Values known = eval_program(*pe->known, known_args);
  Values outs(known.begin(), known.begin() + num_out);
  Values residuals(known.begin() + num_out, known.end());
  std::vector<size_t> differentiated;  // the args whose tangents the staged part reads, in order
  for (size_t i = 0; i < c.num_args; ++i)
    if (!known_in[first_tangent + i]) differentiated.push_back(c.num_consts + i);
  const Avals out_avals = c.call->out_avals();
  auto backward = [pe, residuals, differentiated, out_avals, n = in.size()](const Cotangents& ct) {
    // The staged part is linear in the tangents: its VJP (at zero tangents) is its transpose.
    const Program& staged = *pe->staged;
    Values args = residuals;
    std::vector<bool> staged_active(residuals.size(), false);
    for (size_t i = residuals.size(); i < staged.invars.size(); ++i) {
      args.push_back(ops::zeros(staged.avals[staged.invars[i]]));
      staged_active.push_back(true);
    }
    VjpSplit tangents = linearize(staged, args, staged_active);
    Cotangents staged_ct;
    for (size_t j = 0; j < ct.size(); ++j)
      staged_ct.push_back(ct[j] ? Cotangent(ops::instantiate(ct[j], out_avals[j])) : std::nullopt);
    const Cotangents tangent_ct = tangents.backward(staged_ct);
    Cotangents result(n);
    for (size_t k = 0; k < differentiated.size(); ++k)
      result[differentiated[k]] = tangent_ct[residuals.size() + k];
    return result;
  };
  return VjpSplit{outs, backward};
}

void custom_jvp_call() {
  Primitive p = custom_call("custom_jvp_call");
  p.vjp_split = custom_jvp_vjp_split;
  // Batched operands stay batched in both programs (a tangent as its argument); the
  // others are not broadcast, as JAX batches only what is.
  p.batch = [](const BatchArgs& a) {
    const CustomJvp c(a.params);
    const std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    const auto first_rule_const = batched.begin() + c.num_consts + c.num_args;
    const std::vector<bool> call_flags(batched.begin(), first_rule_const);
    std::vector<bool> rule_flags = call_flags;
    rule_flags.insert(rule_flags.end(), batched.begin() + c.num_consts, first_rule_const);
    rule_flags.insert(rule_flags.end(), first_rule_const, batched.end());
    Params params = a.params;
    params.set("call_jaxpr", batch_program(*c.call, call_flags, a.size));
    params.set("jvp_jaxpr", batch_program(*c.jvp, rule_flags, a.size));
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    return Batched{out, BatchDims(out.size(), 0)};
  };
  // JAX prints the rule by its name, and the consts' count only when there are some.
  p.print_rule = [](PrintedEquation& e) {
    const std::string rule = e.eqn.params.get<std::string>("jvp_name");
    e.hide("jvp_jaxpr");
    e.hide("jvp_name");
    e.add("jvp", {}, rule);
    if (e.eqn.params.get<int64_t>("num_consts") == 0) e.hide("num_consts");
  };
  register_primitive(std::move(p));
}

// linear_call(*res, *lin, *callee_consts, *transpose_consts; call_jaxpr, transpose_jaxpr,
// num_res, num_callee_consts, callee_refusal, transpose_refusal): runs `call_jaxpr`
// (res, lin, callee_consts -> out), a function linear in `lin`, whose transpose is
// `transpose_jaxpr` (res, out cotangents, transpose_consts -> lin cotangents), as JAX's
// linear_call. Its VJP is the linear_call of the two swapped, so a linear map declared once
// with its transpose is differentiated to any order in either direction (forward mode being
// the transpose of the backward pass). A side whose function does not exist (a linear solve
// given no transpose_solve) holds the error that transposing into it raises.
struct LinearCall {
  ProgramPtr callee, transpose;
  size_t num_res, num_lin, num_callee_consts;
  LinearCall(const Params& p)
      : callee(p.get<ProgramPtr>("call_jaxpr")),
        transpose(p.get<ProgramPtr>("transpose_jaxpr")),
        num_res(p.get<int64_t>("num_res")),
        num_callee_consts(p.get<int64_t>("num_callee_consts")) {
    num_lin = callee->invars.size() - num_res - num_callee_consts;
  }
};

void linear_call() {
  Primitive p = custom_call("linear_call");
  // Its other operands' cotangents are the callee's VJP in them (its forward pass then runs
  // the callee's equations in place of the call, to keep what that VJP reads).
  p.vjp_split = [](const Values& in, const std::vector<bool>& active, const Params& params) {
    const LinearCall c(params);
    const size_t num_callee_in = c.callee->invars.size();
    std::vector<bool> nonlinear(num_callee_in, false);
    bool any_nonlinear = false;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!active[i] || (i >= c.num_res && i < c.num_res + c.num_lin)) continue;
      if (i >= num_callee_in)
        fail<NotImplementedError>("Differentiation rule for 'linear_call' not implemented for the "
                                  "constants of its transpose");
      nonlinear[i] = any_nonlinear = true;
    }
    std::optional<VjpSplit> callee_split;
    Values outs;
    if (any_nonlinear) {
      callee_split = linearize(*c.callee, Values(in.begin(), in.begin() + num_callee_in), nonlinear);
      outs = callee_split->out;
    } else {
      outs = meshsim::bind(primitive("linear_call"), in, params);
    }
    const bool lin_active = std::any_of(active.begin() + c.num_res, active.begin() + c.num_res + c.num_lin,
                                        [](bool b) { return b; });
    auto backward = [c, in, params, callee_split, lin_active](const Cotangents& ct) {
      Cotangents result(in.size());
      if (callee_split) {
        const Cotangents callee_ct = callee_split->backward(ct);
        for (size_t i = 0; i < callee_ct.size(); ++i) result[i] = callee_ct[i];
      }
      if (!lin_active) return result;
      const std::string refusal = params.get<std::string>("transpose_refusal");
      if (!refusal.empty()) fail<TypeError>(refusal);
      // The transpose: the same call with the two functions swapped, applied to the cotangents.
      const Avals out_avals = c.callee->out_avals();
      const size_t num_callee_in = c.callee->invars.size();
      Values swapped_in(in.begin(), in.begin() + c.num_res);
      for (size_t j = 0; j < ct.size(); ++j) swapped_in.push_back(ops::instantiate(ct[j], out_avals[j]));
      swapped_in.insert(swapped_in.end(), in.begin() + num_callee_in, in.end());  // the transpose's consts
      swapped_in.insert(swapped_in.end(), in.begin() + num_callee_in - c.num_callee_consts,
                        in.begin() + num_callee_in);
      Params swapped = params;
      swapped.set("call_jaxpr", c.transpose);
      swapped.set("transpose_jaxpr", c.callee);
      swapped.set("num_callee_consts", int64_t(in.size() - num_callee_in));
      swapped.set("callee_refusal", refusal);
      swapped.set("transpose_refusal", params.get<std::string>("callee_refusal"));
      const Values lin_ct = meshsim::bind(primitive("linear_call"), swapped_in, swapped);
      for (size_t k = 0; k < c.num_lin; ++k) result[c.num_res + k] = lin_ct[k];
      return result;
    };
    return VjpSplit{outs, backward};
  };
  // The linear operands are always batched (so are their cotangents); the others keep theirs.
  p.batch = [](const BatchArgs& a) {
    const LinearCall c(a.params);
    std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    std::fill(batched.begin() + c.num_res, batched.begin() + c.num_res + c.num_lin, true);
    const size_t num_callee_in = c.callee->invars.size();
    const std::vector<bool> callee_flags(batched.begin(), batched.begin() + num_callee_in);
    std::vector<bool> transpose_flags(batched.begin(), batched.begin() + c.num_res);
    transpose_flags.insert(transpose_flags.end(), c.callee->outvars.size(), true);
    transpose_flags.insert(transpose_flags.end(), batched.begin() + num_callee_in, batched.end());
    Params params = a.params;
    params.set("call_jaxpr", batch_program(*c.callee, callee_flags, a.size));
    params.set("transpose_jaxpr", batch_program(*c.transpose, transpose_flags, a.size));
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    return Batched{out, BatchDims(out.size(), 0)};
  };
  register_primitive(std::move(p));
}

// Identity primitives that only matter to autodiff.
void identity(const std::string& name, std::function<Cotangents(const VjpArgs&)> vjp,
              bool zero_derivative = false) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.zero_derivative = zero_derivative;
  p.elementwise = true;
  p.abstract_eval = [](const Avals& in, const Params&) { return Avals{in[0]}; };
  p.passes_through = true;
  p.result_is_operand_view = true;
  p.vjp = std::move(vjp);
  p.batch = batch_elementwise;
  register_primitive(std::move(p));
}

// optimization_barrier(*operands): the operands unchanged, as new values. A
// result read keeps every operand computed (what XLA guarantees: nothing is
// moved across the barrier nor dropped from it), so a backward pass can hold
// on to a recomputed value by passing its cotangents through with it.
void optimization_barrier() {
  Primitive p;
  p.name = "optimization_barrier";
  p.operands = at_least(0);
  p.result_is_operand_view = true;
  p.vma_from_abstract_eval = true;
  p.abstract_eval = [](const Avals& in, const Params&) { return in; };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) { return in; };
  p.cost = [](const Avals&, const Params&, const Avals&) { return Cost{}; };
  p.vjp = [](const VjpArgs& a) { return a.ct; };
  p.batch = [](const BatchArgs& a) { return Batched{meshsim::bind(a.prim, a.in, a.params), a.dims}; };
  p.sharding_rule = [](const Avals& in, const Params&, const Avals&) {
    std::vector<Spec> specs;
    for (const Aval& a : in) specs.push_back(spec_of(a));
    return specs;
  };
  p.local_plan = [](const Avals& in, const Params& params, const Avals&) -> std::optional<LocalPlan> {
    LocalPlan plan;
    for (const Aval& a : in) plan.in_specs.push_back(spec_of(a));
    plan.out_specs = plan.in_specs;
    plan.params = params;
    return plan;
  };
  p.factors = [](const Avals& in, const Params&, const Avals&) -> std::optional<FactorMap> {
    FactorMap m;  // each result's dimensions are its operand's
    for (const Aval& a : in) {
      std::vector<int> dims;
      for (size_t d = 0; d < a.shape.size(); ++d) dims.push_back(m.num_factors++);
      m.in.push_back(dims);
      m.out.push_back(dims);
    }
    return m;
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_autodiff_primitives() {
  remat();
  custom_vjp_call();
  custom_jvp_call();
  linear_call();
  identity("stop_gradient", [](const VjpArgs&) { return Cotangents(1); }, true);
  // checkpoint_name(x, name): policies such as save_only_these_names see it.
  identity("name", [](const VjpArgs& a) { return Cotangents{a.ct[0]}; });
  optimization_barrier();
}

}  // namespace meshsim
