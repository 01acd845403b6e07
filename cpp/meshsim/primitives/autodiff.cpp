// Autodiff primitives: checkpointed regions (JAX's remat2), custom VJPs,
// stop_gradient, checkpoint_name and optimization_barrier. The first two hold sub-programs and
// supply their own `vjp_split` (see transforms/vjp.h).
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/program_calls.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/sharding/propagation.h"
#include "meshsim/sharding/rules.h"
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

  template <class V>
  std::vector<V> call_inputs(const std::vector<V>& in) const {
    std::vector<V> r(in.begin(), in.begin() + num_args + call_consts);
    return r;
  }
};

void custom_vjp_call() {
  Primitive p;
  p.name = "custom_vjp_call";
  p.operands = at_least(0);  // as many as its program's inputs (call_avals checks them)
  p.sub_program_params = {"call_jaxpr"};
  p.factors = call_factors("call_jaxpr");
  p.local_plan = call_plan("call_jaxpr");
  p.sharding_rule = sub_program_specs;
  p.kind = Kind::HigherOrder;
  p.vma_from_abstract_eval = true;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const CustomVjp c(params);
    return call_avals("custom_vjp_call", *c.call, in, 0, c.num_args + c.call_consts);
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    const CustomVjp c(params);
    return run_program(c.call, c.call_inputs(in));
  };
  p.mesh_call = [](const MeshContext& mesh, const std::vector<Tensors>& in, const Params& params,
                   const Avals&) {
    const CustomVjp c(params);
    std::vector<Tensors> args;
    for (const Tensors& device_in : in) args.push_back(c.call_inputs(device_in));
    return run_on_mesh(c.call, mesh, std::move(args));
  };
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
  identity("stop_gradient", [](const VjpArgs&) { return Cotangents(1); }, true);
  // checkpoint_name(x, name): policies such as save_only_these_names see it.
  identity("name", [](const VjpArgs& a) { return Cotangents{a.ct[0]}; });
  optimization_barrier();
}

}  // namespace meshsim
