// A trace that holds only what waits for its own inputs.
//
// While a trace is marked deferring, a bind whose operands include none of its
// tracers but some tracer of an enclosing trace is recorded into the trace just
// below it instead: only work that reads the deferring trace's own inputs stays
// there (and work on constants alone that makes scalars). Reverse-mode autodiff runs each VJP rule on placeholder cotangents in
// such a trace, so a rule's primal-only work (cos x for sin, 2 x for a square)
// lands in the forward pass next to its equation and is saved, as JAX's
// linearization computes it, while the cotangent arithmetic waits.
#pragma once
#include "meshsim/ir/trace.h"

namespace meshsim {

// Marks `trace` deferring for the lifetime of the scope (per thread, nestable).
class DeferringScope {
 public:
  explicit DeferringScope(const TracePtr& trace);
  ~DeferringScope();
  DeferringScope(const DeferringScope&) = delete;
  DeferringScope& operator=(const DeferringScope&) = delete;

 private:
  const Trace* trace_;
};

// The trace a bind of `inputs` giving `out_avals` records into when `trace` is
// the innermost one.
TracePtr recording_trace(const TracePtr& trace, const std::vector<Value>& inputs, const Avals& out_avals);

}  // namespace meshsim
