#include "meshsim/transforms/vjp.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "meshsim/ir/deferring_trace.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/program_consts.h"

namespace meshsim {
namespace {

thread_local PolicyEvaluator g_policy_evaluator;

// Opens a trace for the lifetime of the scope.
struct TraceScope {
  TracePtr trace = push_trace();
  ~TraceScope() { pop_trace(trace); }
};

bool has_inexact_output(const Program& p, const Equation& e) {
  for (int v : e.outputs)
    if (is_inexact(p.avals[v].dtype)) return true;
  return false;
}

std::vector<std::optional<Value>> initial_env(const Program& p) {
  std::vector<std::optional<Value>> env(p.avals.size());
  for (size_t i = 0; i < p.constvars.size(); ++i) {
    const int v = p.constvars[i];
    env[v] = Value(const_array(p, i));
  }
  return env;
}

// A cotangent's type is its primal's with pending and performed sums swapped:
// the cotangent of a value unreduced over an axis is reduced there, and back.
Aval cotangent_aval(Aval a) {
  std::swap(a.unreduced, a.reduced);
  return a;
}

Values read(const std::vector<std::optional<Value>>& env, const std::vector<int>& vars) {
  Values vals;
  vals.reserve(vars.size());
  for (int v : vars) vals.push_back(*env[v]);
  return vals;
}

// A VJP rule run at forward time on placeholder cotangents (see
// ir/deferring_trace.h): what reads only primal values has been bound into the
// forward pass; `linear` is the rest, a program of the placeholders (then the
// forward values it captured) that gives the rule's present input cotangents.
struct DeferredRule {
  ProgramPtr linear;
  std::vector<TracerPtr> captured;
  std::vector<std::optional<Aval>> ct_types;  // per output: the placeholder's type, if it had one
  std::vector<bool> gives;                    // per input: the rule returned a cotangent
};

// One differentiated equation of a forward pass.
struct Step {
  const Equation* eqn;
  Values in, out;
  std::vector<bool> active;
  std::function<Cotangents(const Cotangents&)> backward;  // from vjp_split
  std::optional<DeferredRule> rule;                       // for a `vjp` rule that could run early
};

// The forward pass of a program at some inputs, kept for its backward pass.
class Tape {
 public:
  explicit Tape(const Program& p) : p_(p), env_(initial_env(p)), active_(p.avals.size(), false) {}

  // Binds the forward pass into the current trace. `reuse[k]`, when set,
  // holds the outputs of equation k computed earlier (not bound again).
  void forward(const Values& args, const std::vector<bool>& active,
               const std::vector<std::optional<Values>>* reuse = nullptr) {
    for (size_t i = 0; i < p_.invars.size(); ++i) {
      const int v = p_.invars[i];
      env_[v] = args[i];
      active_[v] = active[i] && is_inexact(p_.avals[v].dtype);
    }
    for (size_t k = 0; k < p_.eqns.size(); ++k) {
      const Equation& e = p_.eqns[k];
      SourceInfoScope source(e.source_info);
      const std::optional<Values>* earlier = reuse ? &(*reuse)[k] : nullptr;
      Values in = read(env_, e.inputs);
      std::vector<bool> act;
      bool any = false;
      for (int v : e.inputs) {
        act.push_back(active_[v]);
        any = any || active_[v];
      }
      auto bind_or_reuse = [&] {
        return earlier && earlier->has_value() ? **earlier : meshsim::bind(*e.prim, in, e.params);
      };
      if (!any || !has_inexact_output(p_, e) || e.prim->zero_derivative) {
        store(e, bind_or_reuse(), false);
        continue;
      }
      Step step{&e, in, {}, act, nullptr};
      if (e.prim->vjp_split) {
        VjpSplit split = e.prim->vjp_split(in, act, e.params);
        step.out = std::move(split.out);
        step.backward = std::move(split.backward);
      } else if (e.prim->vjp) {
        step.out = bind_or_reuse();
        step.rule = run_rule_early(step);
      } else {
        fail<NotImplementedError>("Differentiation rule for '", e.prim->name, "' not implemented");
      }
      store(e, step.out, true);
      steps_.push_back(std::move(step));
    }
  }

  Values outputs() const { return read(env_, p_.outvars); }

  // Emits the backward pass into the current trace.
  Cotangents backward(const Cotangents& out_ct) {
    std::vector<Cotangent> ct(p_.avals.size());
    auto accumulate = [&](int v, const Value& c, const char* prim) {
      if (!active_[v]) return;
      const Aval &want = p_.avals[v], &got = aval_of(c);
      if (got.shape != want.shape)
        fail<std::logic_error>("the VJP rule of '", prim, "' returned a cotangent of shape ",
                               shape_str(got.shape), " for an input of shape ", shape_str(want.shape));
      Value value = got.dtype == want.dtype ? c : ops::convert(c, want.dtype, want.weak_type);
      value = ops::reshard_like(value, want);
      ct[v] = ct[v] ? ops::add_any(*ct[v], value) : value;
    };
    for (size_t i = 0; i < p_.outvars.size(); ++i)
      if (out_ct[i]) accumulate(p_.outvars[i], *out_ct[i], "<output>");
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      const Step& s = *it;
      const Equation& e = *s.eqn;
      Cotangents cts;
      bool any = false;
      for (int v : e.outputs) {
        cts.push_back(ct[v]);
        any = any || ct[v].has_value();
        ct[v].reset();  // read once: the equation is the variable's only producer
      }
      if (!any) continue;
      SourceInfoScope source(e.source_info);
      Cotangents in_ct = s.backward                       ? s.backward(cts)
                         : s.rule && fits(*s.rule, cts) ? apply(*s.rule, cts)
                                                        : e.prim->vjp(VjpArgs{s.in, s.out, cts, e.params, s.active});
      if (in_ct.size() != e.inputs.size())
        fail<std::logic_error>("the VJP rule of '", e.prim->name, "' returned ", in_ct.size(),
                               " cotangents for ", e.inputs.size(), " inputs");
      for (size_t i = 0; i < in_ct.size(); ++i)
        if (s.active[i] && in_ct[i]) accumulate(e.inputs[i], *in_ct[i], e.prim->name.c_str());
    }
    Cotangents result;
    for (int v : p_.invars) result.push_back(active_[v] ? ct[v] : std::nullopt);
    return result;
  }

 private:
  // Runs the step's rule with a placeholder cotangent for each differentiated
  // output. Nothing when the rule raises: it then runs in the backward pass as
  // written, and raises there only if a cotangent reaches it.
  std::optional<DeferredRule> run_rule_early(const Step& step) const {
    const Equation& e = *step.eqn;
    DeferredRule rule;
    TracePtr trace = push_trace();
    try {
      DeferringScope deferring(trace);
      Cotangents cts;
      for (int v : e.outputs) {
        if (!is_inexact(p_.avals[v].dtype)) {  // the outputs store() marks active
          rule.ct_types.emplace_back();
          cts.emplace_back();
          continue;
        }
        rule.ct_types.push_back(cotangent_aval(p_.avals[v]));
        cts.emplace_back(trace->new_input(*rule.ct_types.back()));
      }
      Cotangents in_ct = e.prim->vjp(VjpArgs{step.in, step.out, cts, e.params, step.active});
      Values given;
      for (const Cotangent& c : in_ct) {
        rule.gives.push_back(c.has_value());
        if (c) given.push_back(*c);
      }
      rule.linear = trace->finish(given, &rule.captured);
    } catch (...) {
      pop_trace(trace);
      return std::nullopt;
    }
    pop_trace(trace);
    return rule;
  }

  // The cotangents are those the rule ran on: present for the same outputs, of the same types.
  static bool fits(const DeferredRule& rule, const Cotangents& cts) {
    for (size_t i = 0; i < cts.size(); ++i) {
      if (cts[i].has_value() != rule.ct_types[i].has_value()) return false;
      if (cts[i] && !aval_of(*cts[i]).same_type(*rule.ct_types[i])) return false;
    }
    return true;
  }

  static Cotangents apply(const DeferredRule& rule, const Cotangents& cts) {
    Values args;
    for (const Cotangent& c : cts)
      if (c) args.push_back(*c);
    args.insert(args.end(), rule.captured.begin(), rule.captured.end());
    Values given = eval_program(*rule.linear, args);
    Cotangents in_ct;
    size_t next = 0;
    for (bool g : rule.gives) in_ct.push_back(g ? Cotangent(given[next++]) : std::nullopt);
    return in_ct;
  }

  void store(const Equation& e, const Values& out, bool active) {
    for (size_t i = 0; i < e.outputs.size(); ++i) {
      const int v = e.outputs[i];
      env_[v] = out[i];
      active_[v] = active && is_inexact(p_.avals[v].dtype);
    }
  }

  const Program& p_;
  std::vector<std::optional<Value>> env_;
  std::vector<bool> active_;
  std::vector<Step> steps_;
};

// Values of every variable of `p` at `args`, bound into the current trace.
std::shared_ptr<std::vector<std::optional<Value>>> eval_all(const Program& p, const Values& args) {
  auto env = std::make_shared<std::vector<std::optional<Value>>>(initial_env(p));
  for (size_t i = 0; i < p.invars.size(); ++i) (*env)[p.invars[i]] = args[i];
  for (const Equation& e : p.eqns) {
    SourceInfoScope source(e.source_info);
    Values out = meshsim::bind(*e.prim, read(*env, e.inputs), e.params);
    for (size_t i = 0; i < e.outputs.size(); ++i) (*env)[e.outputs[i]] = out[i];
  }
  return env;
}

// Residuals the backward program no longer reads once its dead code is gone
// (a checkpointed region replays its forward pass in the backward trace, so a
// saved value is captured even when only dead equations read it, such as a
// matmul's output whose only use is a sum into the region's result) are
// dropped from both programs, as JAX's partial evaluation drops residuals the
// backward pass does not use.
void drop_unread_residuals(VjpPrograms& r) {
  Program& bwd = *r.bwd;
  std::vector<bool> read(bwd.avals.size(), false);
  for (const Equation& e : bwd.eqns)
    for (int v : e.inputs) read[v] = true;
  for (int v : bwd.outvars) read[v] = true;
  const size_t first = bwd.invars.size() - static_cast<size_t>(r.num_residuals);
  const size_t fwd_first = r.fwd->outvars.size() - static_cast<size_t>(r.num_residuals);
  std::vector<int> invars(bwd.invars.begin(), bwd.invars.begin() + first);
  std::vector<int> outvars(r.fwd->outvars.begin(), r.fwd->outvars.begin() + fwd_first);
  for (size_t q = 0; q < static_cast<size_t>(r.num_residuals); ++q) {
    if (!read[bwd.invars[first + q]]) continue;
    invars.push_back(bwd.invars[first + q]);
    outvars.push_back(r.fwd->outvars[fwd_first + q]);
  }
  r.num_residuals = static_cast<int>(invars.size() - first);
  bwd.invars = std::move(invars);
  r.fwd->outvars = std::move(outvars);
}

}  // namespace

VjpSplit linearize(const Program& program, const Values& args, const std::vector<bool>& active,
                   const std::optional<std::string>& remat_policy) {
  if (!remat_policy) {
    auto tape = std::make_shared<Tape>(program);
    tape->forward(args, active);
    return {tape->outputs(), [tape](const Cotangents& ct) { return tape->backward(ct); }};
  }
  // Checkpointed: the forward pass keeps no tape. The backward pass runs the
  // region again in the backward trace, taking from the forward pass only the
  // inputs and what the policy saves.
  auto env = eval_all(program, args);
  Values out = read(*env, program.outvars);
  const std::string policy = *remat_policy;
  auto backward = [&program, env, args, active, policy](const Cotangents& ct) {
    std::vector<std::optional<Values>> reuse(program.eqns.size());
    for (size_t k = 0; k < program.eqns.size(); ++k) {
      const Equation& e = program.eqns[k];
      if (e.prim->vjp_split) continue;  // its own rule decides what to keep
      Avals in;
      for (int v : e.inputs) in.push_back(program.avals[v]);
      if (is_saveable(policy, *e.prim, in, e.params)) reuse[k] = read(*env, e.outputs);
    }
    Tape tape(program);
    tape.forward(args, active, &reuse);
    return tape.backward(ct);
  };
  return {out, backward};
}

VjpPrograms vjp_program(const Program& program, const std::vector<bool>& wrt,
                        const std::vector<bool>& out_mask) {
  if (wrt.size() != program.invars.size() || out_mask.size() != program.outvars.size())
    fail<ValueError>("vjp_program: expected ", program.invars.size(), " input and ",
                     program.outvars.size(), " output flags, got ", wrt.size(), " and ", out_mask.size());
  VjpPrograms r;
  TraceScope fwd;
  Values args;
  for (int v : program.invars) {
    const Aval& a = program.avals[v];
    args.push_back(fwd.trace->new_input(a));
    r.ct_out.push_back(wrt[args.size() - 1] && is_inexact(a.dtype));
  }
  VjpSplit split = linearize(program, args, r.ct_out);

  std::vector<TracerPtr> residuals;
  {
    TraceScope bwd;
    Cotangents ct;
    for (size_t j = 0; j < program.outvars.size(); ++j) {
      const Aval& a = program.avals[program.outvars[j]];
      r.ct_in.push_back(out_mask[j] && is_inexact(a.dtype));
      ct.push_back(r.ct_in[j] ? Cotangent(bwd.trace->new_input(cotangent_aval(a))) : std::nullopt);
    }
    Cotangents in_ct = split.backward(ct);
    Values results;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!r.ct_out[i]) continue;
      const Aval& a = program.avals[program.invars[i]];
      // Keeps the cotangent's weak type, as JAX does; the dtype is the input's.
      const Value c = ops::instantiate(in_ct[i], cotangent_aval(a));
      const Aval& got = aval_of(c);
      results.push_back(got.dtype == a.dtype ? c : ops::convert(c, a.dtype, got.weak_type));
    }
    r.bwd = bwd.trace->finish(results, &residuals);
  }
  // The backward trace captured the residuals walking the program in reverse;
  // JAX lists them in the order the forward pass computes them.
  std::vector<size_t> order(residuals.size());
  for (size_t q = 0; q < order.size(); ++q) order[q] = q;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Tracer &x = *residuals[a], &y = *residuals[b];
    return std::make_pair(x.trace->level(), x.var) < std::make_pair(y.trace->level(), y.var);
  });
  {
    const size_t first = r.bwd->invars.size() - residuals.size();
    std::vector<TracerPtr> sorted;
    std::vector<int> invars(r.bwd->invars.begin(), r.bwd->invars.begin() + first);
    for (size_t q : order) {
      sorted.push_back(residuals[q]);
      invars.push_back(r.bwd->invars[first + q]);
    }
    residuals = std::move(sorted);
    r.bwd->invars = std::move(invars);
  }
  Values outs = split.out;
  outs.insert(outs.end(), residuals.begin(), residuals.end());
  r.fwd = fwd.trace->finish(outs);
  r.num_residuals = static_cast<int>(residuals.size());
  dce(*r.bwd);
  drop_unread_residuals(r);
  dce(*r.fwd);
  return r;
}

Values eval_program(const Program& program, const Values& args) {
  if (args.size() != program.invars.size())
    fail<TypeError>("program expects ", program.invars.size(), " arguments, got ", args.size());
  auto env = initial_env(program);
  for (size_t i = 0; i < args.size(); ++i) env[program.invars[i]] = args[i];
  // Release each intermediate after its last use, as the interpreter does.
  std::vector<int> last_use(program.avals.size(), -1);
  for (size_t k = 0; k < program.eqns.size(); ++k)
    for (int v : program.eqns[k].inputs) last_use[v] = static_cast<int>(k);
  for (int v : program.outvars) last_use[v] = static_cast<int>(program.eqns.size());
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Equation& e = program.eqns[k];
    Values out;
    {
      SourceInfoScope source(e.source_info);
      out = meshsim::bind(*e.prim, read(env, e.inputs), e.params);
    }
    for (size_t i = 0; i < e.outputs.size(); ++i) env[e.outputs[i]] = out[i];
    for (int v : e.inputs)
      if (last_use[v] == static_cast<int>(k)) env[v].reset();
  }
  return read(env, program.outvars);
}

void dce(Program& program) {
  std::vector<bool> live(program.avals.size(), false);
  for (int v : program.outvars) live[v] = true;
  std::vector<bool> keep(program.eqns.size(), false);
  for (size_t k = program.eqns.size(); k-- > 0;) {
    const Equation& e = program.eqns[k];
    keep[k] = e.outputs.empty();  // effects only (debug_callback)
    for (int v : e.outputs) keep[k] = keep[k] || live[v];
    if (keep[k])
      for (int v : e.inputs) live[v] = true;
  }
  std::vector<Equation> eqns;
  for (size_t k = 0; k < program.eqns.size(); ++k)
    if (keep[k]) eqns.push_back(std::move(program.eqns[k]));
  program.eqns = std::move(eqns);
  // Constants nothing reads go too.
  std::vector<int> constvars;
  std::vector<Tensor> consts;
  for (size_t i = 0; i < program.constvars.size(); ++i)
    if (live[program.constvars[i]]) {
      constvars.push_back(program.constvars[i]);
      consts.push_back(program.consts[i]);
    }
  program.constvars = std::move(constvars);
  program.consts = std::move(consts);
}

bool is_saveable(const std::string& policy, const Primitive& prim, const Avals& in, const Params& params) {
  if (policy.empty() || policy == "nothing_saveable") return false;
  if (policy == "everything_saveable") return true;
  if (policy == "dots_saveable" || policy == "checkpoint_dots") return bool(prim.saved_as_dot);
  if (policy == "dots_with_no_batch_dims_saveable" || policy == "checkpoint_dots_with_no_batch_dims")
    return prim.saved_as_dot && prim.saved_as_dot(params);
  if (!g_policy_evaluator) fail<ValueError>("unknown checkpoint policy '", policy, "'");
  return g_policy_evaluator(policy, prim, in, params);
}

ScopedPolicyEvaluator::ScopedPolicyEvaluator(PolicyEvaluator f) : previous_(std::move(g_policy_evaluator)) {
  g_policy_evaluator = std::move(f);
}

ScopedPolicyEvaluator::~ScopedPolicyEvaluator() { g_policy_evaluator = std::move(previous_); }

}  // namespace meshsim
