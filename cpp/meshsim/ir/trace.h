// Tracing: how a call to a primitive becomes either an eager computation or
// an equation in the program being traced.
//
// Traces form a stack. While one is open, every bind records into the
// innermost trace: concrete arrays become constants of the program, tracers
// of enclosing traces become captured inputs. With no trace open, bind runs
// the primitive's kernel at once.
#pragma once
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "meshsim/core/array.h"
#include "meshsim/ir/program.h"

namespace meshsim {

class Trace;

// jax.errors.UnexpectedTracerError (a TypeError): a tracer used after the
// trace that made it has closed, as when a traced function stores one in a
// global.
struct UnexpectedTracerError : TypeError { using TypeError::TypeError; };

// A value inside a trace: variable `var` of `trace`'s program.
struct Tracer {
  std::shared_ptr<Trace> trace;
  int var;
  const Aval& aval() const;
};
// (TracerPtr and Value, what a primitive is applied to: ir/primitive.h.)

// A copy: a tracer's aval lives in its program's growing list of variables,
// which binding more equations may move.
Aval aval_of(const Value& v);

class Trace : public std::enable_shared_from_this<Trace> {
 public:
  explicit Trace(int level) : level_(level) {}
  int level() const { return level_; }
  bool is_open() const { return open_; }

  TracerPtr new_input(const Aval& aval);
  // The variable standing for `v` in this trace (adding a constant or capture).
  int var_for(const Value& v);
  std::vector<TracerPtr> record(const Primitive& prim, std::vector<int> inputs, Params params,
                                const Avals& out_avals);
  // Closes the trace with the given outputs and returns the finished program.
  // Captured tracers of enclosing traces are returned in `captures`, in the
  // order of the program's trailing invars.
  ProgramPtr finish(const std::vector<Value>& outputs, std::vector<TracerPtr>* captures = nullptr);
  Program& program() { return program_; }

 private:
  int level_;
  bool open_ = true;
  Program program_;
  std::vector<std::pair<const Array*, int>> const_vars_;    // dedup of constants
  std::vector<std::pair<TracerPtr, int>> captured_;         // outer tracer -> our invar
  std::vector<ArrayPtr> const_arrays_;
};
using TracePtr = std::shared_ptr<Trace>;

// Source information of recorded equations. The Python layer installs how to
// find the user's frame (bindings); a transform re-binding an equation scopes
// that equation's own, so what it derives keeps the user's line, as in JAX.
using SourceCapture = std::function<SourceInfo()>;
void set_source_capture(SourceCapture capture);
class SourceInfoScope {
 public:
  explicit SourceInfoScope(SourceInfo info);
  ~SourceInfoScope();
  SourceInfoScope(const SourceInfoScope&) = delete;
  SourceInfoScope& operator=(const SourceInfoScope&) = delete;

 private:
  SourceInfo previous_;
  bool previous_set_;
};

// The trace stack (per thread: tracing happens on the Python thread).
TracePtr push_trace();
void pop_trace(const TracePtr& t);
TracePtr current_trace();  // null when nothing is being traced

// Traces `build` on fresh inputs of the given types into a new program.
ProgramPtr trace_program(const Avals& in, const std::function<std::vector<Value>(const std::vector<Value>&)>& build);

// Applies a primitive: records it when tracing, runs it otherwise.
std::vector<Value> bind(const Primitive& prim, const std::vector<Value>& inputs,
                        const Params& params);

// `x` cast to varying over those of `axes` it is invariant over (a `pvary`,
// free at run time); `x` itself when there are none or VMA checking is off.
Value vary_over(const Value& x, const AxisNames& axes);

// Output types of a primitive for the given inputs (shape/dtype, then VMA).
Avals infer_avals(const Primitive& prim, const Avals& in, const Params& params);

}  // namespace meshsim
