#include "meshsim/ir/trace.h"

#include <algorithm>

#include "meshsim/ir/axis_env.h"
#include "meshsim/ir/deferring_trace.h"
#include "meshsim/ir/hooks.h"
#include "meshsim/ir/unreduced.h"

namespace meshsim {
namespace {
thread_local std::vector<TracePtr> g_stack;
thread_local std::vector<const Trace*> g_deferring;  // traces marked by a DeferringScope

// Installed once at import (runtime/hooks.h), before anything is bound.
ShardingTyping g_sharding_typing;
EagerApplication g_eager_application;
SourceCapture g_source_capture;

// Set while a transform re-binds an equation: what it records takes that
// equation's source instead of the frame doing the re-binding.
thread_local SourceInfo g_source_override;
thread_local bool g_source_overridden = false;

SourceInfo current_source_info() {
  if (g_source_overridden) return g_source_override;
  return g_source_capture ? g_source_capture() : nullptr;
}

[[noreturn]] void fail_not_installed(const char* hook) {
  fail<std::logic_error>(hook, " is not installed: call install_runtime_hooks() first");
}
}  // namespace

void set_sharding_typing(ShardingTyping typing) { g_sharding_typing = std::move(typing); }
void set_eager_application(EagerApplication apply) { g_eager_application = std::move(apply); }
void set_source_capture(SourceCapture capture) { g_source_capture = std::move(capture); }

SourceInfoScope::SourceInfoScope(SourceInfo info)
    : previous_(std::move(g_source_override)), previous_set_(g_source_overridden) {
  g_source_override = std::move(info);
  g_source_overridden = true;
}
SourceInfoScope::~SourceInfoScope() {
  g_source_override = std::move(previous_);
  g_source_overridden = previous_set_;
}

const Aval& Tracer::aval() const { return trace->program().avals[var]; }

Aval aval_of(const Value& v) {
  if (auto* a = std::get_if<ArrayPtr>(&v)) return (*a)->aval();
  return std::get<TracerPtr>(v)->aval();
}

TracerPtr Trace::new_input(const Aval& aval) {
  int v = program_.new_var(aval);
  program_.invars.push_back(v);
  return std::make_shared<Tracer>(Tracer{shared_from_this(), v});
}

int Trace::var_for(const Value& v) {
  if (auto* a = std::get_if<ArrayPtr>(&v)) {
    for (auto& [ptr, var] : const_vars_) if (ptr == a->get()) return var;
    Aval aval = (*a)->aval();
    int var = program_.new_var(aval);
    program_.constvars.push_back(var);
    program_.consts.push_back((*a)->global());
    const_vars_.emplace_back(a->get(), var);
    const_arrays_.push_back(*a);  // keeps the pointer used for dedup alive
    return var;
  }
  const TracerPtr& t = std::get<TracerPtr>(v);
  if (t->trace.get() == this) return t->var;
  if (!t->trace->is_open() || t->trace->level() > level_)
    fail<ValueError>("Encountered an unexpected tracer: a value from a finished trace (",
                     t->aval().str_short(), ") was used outside the function that produced it. "
                     "Return it from the transformed function instead of leaking it.");
  for (auto& [outer, var] : captured_) if (outer.get() == t.get()) return var;
  int var = program_.new_var(t->aval());
  captured_.emplace_back(t, var);
  return var;
}

std::vector<TracerPtr> Trace::record(const Primitive& prim, std::vector<int> inputs, Params params,
                                     const Avals& out_avals) {
  Equation e{&prim, std::move(params), std::move(inputs), {}, current_source_info()};
  std::vector<TracerPtr> outs;
  for (const Aval& a : out_avals) {
    int v = program_.new_var(a);
    e.outputs.push_back(v);
    outs.push_back(std::make_shared<Tracer>(Tracer{shared_from_this(), v}));
  }
  program_.eqns.push_back(std::move(e));
  return outs;
}

ProgramPtr Trace::finish(const std::vector<Value>& outputs, std::vector<TracerPtr>* captures) {
  for (const Value& v : outputs) program_.outvars.push_back(var_for(v));
  for (auto& [outer, var] : captured_) {
    program_.invars.push_back(var);
    if (captures) captures->push_back(outer);
  }
  if (!captures && !captured_.empty())
    fail<ValueError>("a traced function closed over a value of an enclosing trace");
  open_ = false;
  return std::make_shared<Program>(program_);
}

TracePtr push_trace() {
  auto t = std::make_shared<Trace>(static_cast<int>(g_stack.size()));
  g_stack.push_back(t);
  return t;
}

void pop_trace(const TracePtr& t) {
  auto it = std::find(g_stack.begin(), g_stack.end(), t);
  if (it != g_stack.end()) g_stack.erase(it, g_stack.end());
}

TracePtr current_trace() { return g_stack.empty() ? nullptr : g_stack.back(); }

DeferringScope::DeferringScope(const TracePtr& trace) : trace_(trace.get()) { g_deferring.push_back(trace_); }
DeferringScope::~DeferringScope() {
  auto it = std::find(g_deferring.rbegin(), g_deferring.rend(), trace_);
  if (it != g_deferring.rend()) g_deferring.erase(std::next(it).base());
}

TracePtr recording_trace(const TracePtr& trace, const std::vector<Value>& inputs, const Avals& out_avals) {
  if (g_deferring.empty() || std::find(g_deferring.begin(), g_deferring.end(), trace.get()) == g_deferring.end())
    return trace;
  bool reads_enclosing = false;
  for (const Value& v : inputs) {
    auto* t = std::get_if<TracerPtr>(&v);
    if (!t) continue;
    if ((*t)->trace == trace) return trace;
    reads_enclosing = true;
  }
  // Work on constants alone moves only when it makes scalars (a literal cast
  // to varying): moving a broadcast would make it a saved value.
  bool scalars = true;
  for (const Aval& a : out_avals) scalars = scalars && a.shape.empty();
  const int below = trace->level() - 1;
  if (!(reads_enclosing || scalars) || below < 0 || static_cast<size_t>(below) >= g_stack.size() ||
      g_stack[below] == trace)
    return trace;
  return recording_trace(g_stack[below], inputs, out_avals);
}

ProgramPtr trace_program(const Avals& in, const std::function<std::vector<Value>(const std::vector<Value>&)>& build) {
  TracePtr trace = push_trace();
  try {
    std::vector<Value> args;
    for (const Aval& a : in) args.push_back(trace->new_input(a));
    ProgramPtr program = trace->finish(build(args));
    pop_trace(trace);
    return program;
  } catch (...) {
    pop_trace(trace);
    throw;
  }
}

namespace {

// The union of the operands' varying manual axes, in mesh order.
AxisNames vma_union(const Avals& in) {
  AxisNames all;
  for (const Aval& a : in)
    for (const auto& n : a.vma)
      if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  const AxisEnv* env = current_axis_env();
  return env ? env->mesh->in_mesh_order(all) : all;
}

// JAX's standard VMA rule: an operand invariant over an axis another operand
// varies over is first cast to varying (`pvary`, free at run time).
std::vector<Value> pvary_to_union(const Primitive& prim, const std::vector<Value>& inputs) {
  if (prim.vma_rule || prim.vma_from_abstract_eval || inputs.size() < 2 || !vma_checking()) return inputs;
  Avals in;
  for (const Value& v : inputs) in.push_back(aval_of(v));
  AxisNames all = vma_union(in);
  std::vector<Value> out = inputs;
  for (Value& v : out) v = vary_over(v, all);
  return out;
}

}  // namespace

Value vary_over(const Value& x, const AxisNames& axes) {
  if (!vma_checking()) return x;
  const AxisNames& vma = aval_of(x).vma;
  AxisNames missing;
  for (const auto& n : current_axis_env()->mesh->in_mesh_order(axes))
    if (std::find(vma.begin(), vma.end(), n) == vma.end()) missing.push_back(n);
  if (missing.empty()) return x;
  // A value reduced over exactly the missing axes becomes varying by the free
  // reduced->varying cast (pvary refuses reduced operands), as JAX inserts it.
  AxisNames reduced = current_axis_env()->mesh->in_mesh_order(aval_of(x).reduced);
  const char* cast = reduced == missing ? "reduced_vary_cast_p" : "pvary";
  return bind(primitive(cast), {x}, Params{{"axes", missing}})[0];
}

Avals infer_avals(const Primitive& prim, const Avals& in, const Params& params) {
  if (!g_sharding_typing) fail_not_installed("sharding typing");
  if (prim.operands.declared() && !prim.operands.admits(in.size()))
    fail<TypeError>(prim.name, " takes ", prim.operands.str(), ", got ", in.size());
  Avals out = prim.abstract_eval(in, params);
  if (prim.vma_from_abstract_eval) {
    g_sharding_typing(prim, in, params, out);
    return out;
  }
  AxisNames vma = prim.vma_rule ? prim.vma_rule(in, params) : vma_union(in);
  for (Aval& a : out) a.vma = vma;
  // Pending reductions: the primitive's rule, or JAX's default for a primitive
  // computing on its operands' blocks; other kinds typed their outputs already.
  const bool computes_on_blocks = prim.kind == Kind::Local || prim.kind == Kind::Collective;
  if (prim.ur_rule || computes_on_blocks) {
    const auto [unreduced, reduced] = prim.ur_rule ? prim.ur_rule(in, params) : default_ur_rule(prim.name, in);
    for (Aval& a : out) {
      a.unreduced = unreduced;
      a.reduced = reduced;
    }
  }
  g_sharding_typing(prim, in, params, out);
  return out;
}

std::vector<Value> bind(const Primitive& prim, const std::vector<Value>& operands,
                        const Params& params) {
  const std::vector<Value> inputs = pvary_to_union(prim, operands);
  Avals in_avals;
  for (const Value& v : inputs) in_avals.push_back(aval_of(v));
  Avals out_avals = infer_avals(prim, in_avals, params);

  if (TracePtr trace = current_trace()) {
    trace = recording_trace(trace, inputs, out_avals);
    std::vector<int> vars;
    for (const Value& v : inputs) vars.push_back(trace->var_for(v));
    std::vector<TracerPtr> outs = trace->record(prim, std::move(vars), params, out_avals);
    return {outs.begin(), outs.end()};
  }

  std::vector<ArrayPtr> arrays;
  for (const Value& v : inputs) {
    if (auto* t = std::get_if<TracerPtr>(&v))
      fail<UnexpectedTracerError>(
          "Encountered an unexpected tracer. A function transformed by JAX had a side effect, allowing for "
          "a reference to an intermediate value with type ", (*t)->aval().str_short(),
          " wrapped in a DynamicJaxprTracer to escape the scope of the transformation.\n"
          "JAX transformations require that functions explicitly return their outputs, and disallow "
          "saving intermediate values to global state.\n"
          "To catch the leak earlier, try setting the environment variable JAX_CHECK_TRACER_LEAKS or "
          "using the `jax.checking_leaks` context manager.");  // the Python class adds the reference line
    arrays.push_back(std::get<ArrayPtr>(v));
  }
  if (!g_eager_application) fail_not_installed("eager application");
  std::vector<ArrayPtr> results = g_eager_application(prim, arrays, in_avals, params, out_avals);
  return {results.begin(), results.end()};
}

}  // namespace meshsim
