// jit(*args; name, jaxpr): a jitted function called while another function is
// traced (a user's nested jax.jit, or a jax.numpy function JAX implements under
// jit, such as _where or _take). JAX keeps it as one equation holding the
// function's program; XLA inlines it, so the executors run the program's
// equations in place (runtime/inlined_calls.h), and vmap and sharding see
// through it as they see through remat2. Autodiff keeps it a call, as JAX's
// does: a forward jit (results and residuals) and a transposed jit.
#include <algorithm>
#include <memory>
#include <optional>

#include "meshsim/ir/ops.h"
#include "meshsim/primitives/program_calls.h"
#include "meshsim/runtime/inlined_calls.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

// The call's params with `program` as its body.
Params calling(const Params& params, const ProgramPtr& program) {
  Params out = params;
  out.set("jaxpr", program);
  return out;
}

// Where the forward call finds each residual: an operand of the call, one of
// its results, or an extra result of its own (`kResult + k`: result k).
constexpr size_t kOperand = size_t(1) << 40, kResult = 0;

// The forward program with only the residuals it computes itself as extra
// results, each once; `from[r]` says where residual r is found. Residuals
// that are the call's operands or results are read there, as JAX forwards them.
ProgramPtr own_residuals(const Program& fwd, size_t num_out, std::vector<size_t>& from) {
  auto out = std::make_shared<Program>(fwd);
  out->outvars.resize(num_out);
  for (size_t r = num_out; r < fwd.outvars.size(); ++r) {
    const int v = fwd.outvars[r];
    auto input = std::find(fwd.invars.begin(), fwd.invars.end(), v);
    auto result = std::find(out->outvars.begin(), out->outvars.end(), v);
    if (input != fwd.invars.end()) {
      from.push_back(kOperand + size_t(input - fwd.invars.begin()));
    } else {
      from.push_back(kResult + size_t(result - out->outvars.begin()));
      if (result == out->outvars.end()) out->outvars.push_back(v);
    }
  }
  dce(*out);
  return out;
}

// The residuals `narrower` (the body split for fewer cotangents) reads, taken
// from those of `wider`: both forward traces bind the same equations, so a
// residual is the same variable in both; nullopt if one is not among them.
std::optional<Values> residuals_among(const VjpPrograms& wider, const VjpPrograms& narrower, size_t num_out,
                                      const Values& residuals) {
  const std::vector<int>& have = wider.fwd->outvars;
  Values picked;
  for (size_t r = num_out; r < narrower.fwd->outvars.size(); ++r) {
    auto at = std::find(have.begin() + num_out, have.end(), narrower.fwd->outvars[r]);
    if (at == have.end()) return std::nullopt;
    picked.push_back(residuals[size_t(at - have.begin()) - num_out]);
  }
  return picked;
}

// Whether `v` of `p` is a zero filled in for an input no cotangent reaches: a
// zero constant, perhaps broadcast, varied or resharded to the input's type.
bool is_filled_zero(const Program& p, int v) {
  for (;;) {
    for (size_t i = 0; i < p.constvars.size(); ++i) {
      if (p.constvars[i] != v) continue;
      const Tensor t = p.consts[i].contiguous();
      const char* bytes = static_cast<const char*>(t.raw());
      return std::all_of(bytes, bytes + t.nbytes(), [](char b) { return b == 0; });
    }
    auto producer = std::find_if(p.eqns.begin(), p.eqns.end(), [v](const Equation& e) {
      return std::find(e.outputs.begin(), e.outputs.end(), v) != e.outputs.end();
    });
    if (producer == p.eqns.end() || producer->inputs.size() != 1) return false;
    const std::string& name = producer->prim->name;
    if (name != "broadcast_in_dim" && name != "pvary" && name != "reshard") return false;
    v = producer->inputs[0];
  }
}

// Drops the inputs `program` does not read, with their operands.
void drop_unread_inputs(Program& program, Values& operands) {
  std::vector<bool> read(program.avals.size(), false);
  for (const Equation& e : program.eqns)
    for (int v : e.inputs) read[v] = true;
  for (int v : program.outvars) read[v] = true;
  std::vector<int> invars;
  Values kept;
  for (size_t i = 0; i < program.invars.size(); ++i) {
    if (!read[program.invars[i]]) continue;
    invars.push_back(program.invars[i]);
    kept.push_back(operands[i]);
  }
  program.invars = std::move(invars);
  operands = std::move(kept);
}

// A forward jit of the body split by `vjp_program` gives the results and the
// residuals; the backward jit takes the residuals, then the results'
// cotangents (JAX's order), and gives the active inputs' cotangents.
VjpSplit jit_vjp(const Values& in, const std::vector<bool>& active, const Params& params) {
  const Program& body = *params.get<ProgramPtr>("jaxpr");
  const size_t num_out = body.outvars.size();
  auto split = std::make_shared<VjpPrograms>(vjp_program(body, active, std::vector<bool>(num_out, true)));
  std::vector<size_t> from;
  ProgramPtr fwd = own_residuals(*split->fwd, num_out, from);
  fwd->name = body.name;
  const Values fwd_outs = meshsim::bind(primitive("jit"), in, calling(params, fwd));
  const Values outs(fwd_outs.begin(), fwd_outs.begin() + num_out);
  Values residuals;
  for (size_t f : from) residuals.push_back(f >= kOperand ? in[f - kOperand] : fwd_outs[f - kResult]);

  const ProgramPtr program = params.get<ProgramPtr>("jaxpr");
  auto backward = [=](const Cotangents& ct) {
    // Cotangents that are symbolic zeros do not enter, as in JAX: the body is
    // split again for the others, and that backward program reads a subset of
    // the residuals.
    std::vector<bool> present(num_out);
    for (size_t j = 0; j < num_out; ++j) present[j] = split->ct_in[j] && ct[j].has_value();
    std::shared_ptr<const VjpPrograms> used = split;
    Values res = residuals;
    if (present != split->ct_in) {
      auto again = std::make_shared<VjpPrograms>(vjp_program(*program, active, present));
      if (std::optional<Values> picked = residuals_among(*split, *again, num_out, residuals)) {
        used = again;
        res = std::move(*picked);
      }
    }
    Values operands = res;
    for (size_t j = 0; j < num_out; ++j)
      if (used->ct_in[j]) operands.push_back(ct[j] ? *ct[j] : ops::zeros(aval_of(outs[j])));
    const Avals bwd_in = used->bwd->in_avals();
    const size_t num_ct = bwd_in.size() - res.size();
    Avals reordered(bwd_in.begin() + num_ct, bwd_in.end());
    reordered.insert(reordered.end(), bwd_in.begin(), bwd_in.begin() + num_ct);
    ProgramPtr bwd = trace_program(reordered, [&](const Values& args) {
      Values body_args(args.begin() + res.size(), args.end());
      body_args.insert(body_args.end(), args.begin(), args.begin() + res.size());
      return eval_program(*used->bwd, body_args);
    });
    bwd->name = program->name;
    // Inputs no cotangent reaches get a symbolic zero, not a result of the call.
    std::vector<size_t> reached;
    std::vector<int> outvars;
    for (size_t i = 0, k = 0; i < in.size(); ++i) {
      if (!used->ct_out[i]) continue;
      const int v = bwd->outvars[k++];
      if (is_filled_zero(*bwd, v)) continue;
      reached.push_back(i);
      outvars.push_back(v);
    }
    bwd->outvars = std::move(outvars);
    dce(*bwd);
    drop_unread_inputs(*bwd, operands);
    Cotangents in_ct(in.size());
    if (reached.empty()) return in_ct;
    const Values results = meshsim::bind(primitive("jit"), operands, calling(params, bwd));
    for (size_t k = 0; k < reached.size(); ++k) in_ct[reached[k]] = results[k];
    return in_ct;
  };
  return {outs, backward};
}

}  // namespace

void register_jit_primitive() {
  Primitive p = program_call("jit", "jaxpr");
  p.prints_as_call = true;
  p.vjp_split = jit_vjp;
  // One call of the batched program, as JAX batches a nested jit: results the
  // batch does not reach stay unbatched.
  p.batch = [](const BatchArgs& a) {
    const std::vector<bool> batched = batched_flags(a.dims, 0, a.in.size());
    BatchDims in_dims;
    for (bool b : batched) in_dims.push_back(b ? 0 : kNotBatched);
    const Program& program = *a.params.get<ProgramPtr>("jaxpr");
    BatchedProgram body = batch_program(program, in_dims, a.size, std::vector<bool>(program.outvars.size(), false));
    Params params = a.params;
    params.set("jaxpr", body.program);
    Values out = meshsim::bind(a.prim, at_front(a, batched), params);
    BatchDims dims;
    for (bool b : body.out_batched) dims.push_back(b ? 0 : kNotBatched);
    return Batched{out, dims};
  };
  register_primitive(std::move(p));
  register_partial_eval_rule("jit", call_partial_eval_rule("jaxpr", false));
  inline_when_compiled("jit", "jaxpr");
}

}  // namespace meshsim
