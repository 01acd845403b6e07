// Runs programs and single primitives.
//
// A top-level program (what `jit` traced) runs over global arrays: most
// primitives see the whole value as one tensor, primitives with an
// `array_kernel` (shard_map) see the arrays' shardings. A shard_map body runs
// per device on local blocks (runtime/mesh_executor.h).
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "meshsim/ir/donated_operands.h"
#include "meshsim/ir/program.h"
#include "meshsim/runtime/fusion.h"
#include "meshsim/runtime/scalar_runs.h"

namespace meshsim {

// Runs one primitive's kernel and checks the results have the promised shapes
// (a primitive that passes its operands through returns them).
Tensors run_primitive(const Primitive& prim, const Tensors& args, const Params& params,
                      const Avals& out_avals);

// Runs equation `e` of a primitive that passes its operands through
// (Primitive::passes_through): each operand's buffer becomes the matching
// result, moved when `moved` says this is its last use; no copy, no kernel.
// `value(var)` is the executor's slot for a variable.
template <class Slot>
void pass_through(const Equation& e, const std::vector<char>& moved, Slot&& value) {
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    Tensor& in = value(e.inputs[i]);
    if (moved[i]) value(e.outputs[i]) = std::move(in);
    else value(e.outputs[i]) = in;
  }
}

// Runs equation `e` on the slots `value(var)` of one device's values. An
// operand read for the last time is moved into the kernel; any other is lent
// to it and given back after, not copied (a Tensor copy allocates its shape
// and strides, which costs as much as a small kernel). Kernels never write
// into their operands, except into a moved one no other view shares
// (ir/donated_operands.h). The results go to their slots and the values `e`
// reads last are freed. `moved` and `freed` are the equation's entries of
// the program's Schedule; `ins` is scratch space kept across equations.
template <class Slot>
void run_equation(const Equation& e, const Avals& out_avals, const std::vector<char>& moved,
                  const std::vector<int>& freed, Tensors& ins, Slot&& value) {
  if (e.prim->passes_through) {
    pass_through(e, moved, value);
  } else {
    // An operand that is an earlier one again (x * x) reads that one's tensor.
    auto first_read = [&](size_t i) {
      return static_cast<size_t>(std::find(e.inputs.begin(), e.inputs.begin() + i, e.inputs[i]) -
                                 e.inputs.begin());
    };
    ins.clear();
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const size_t f = first_read(i);
      if (f < i) ins.push_back(ins[f]);
      else ins.push_back(std::move(value(e.inputs[i])));
    }
    Tensors res;
    {
      const DonatedOperands last_reads(ins, moved);  // a kernel may update these in place
      res = run_primitive(*e.prim, ins, e.params, out_avals);
    }
    for (size_t i = 0; i < e.inputs.size(); ++i)
      if (!moved[i] && first_read(i) == i) value(e.inputs[i]) = std::move(ins[i]);
    for (size_t i = 0; i < res.size(); ++i) value(e.outputs[i]) = std::move(res[i]);
  }
  for (int v : freed) value(v) = Tensor();
}

// For each variable, the index of the last equation reading it (the number of
// equations for program outputs, -1 if never read): buffers go back early.
std::vector<int> last_uses(const Program& program);

// What running a program needs besides its inputs, worked out from the
// program alone: a sub-program called once per loop iteration, branch or
// device reuses it instead of redoing it per call.
struct Schedule {
  std::vector<int> last;                 // per variable: last_uses
  std::vector<Avals> out_avals;          // per equation: its results' types
  std::vector<std::vector<char>> moved;  // per equation and input: its last read (passed by move)
  std::vector<std::vector<int>> freed;   // per equation: the variables it reads last
  FusionPlan fusion;                     // runs of elementwise equations computed as one loop
  ScalarPlan scalars;                    // runs of 0-d integer equations computed in registers
  explicit Schedule(const Program& program);
};

// Runs equation k of a program where the executor's loop reaches it, by the
// schedule's plans: a scalar run at its first equation (its equations are
// consecutive), a fused run at its last. `one(j)` runs equation j alone;
// `fused(g)` and `scalar(r)` try the run and return false when its equations
// must run one by one. Only while fusion_enabled() (a profiler records each
// equation otherwise).
template <class One, class Fused, class Scalar>
void run_in_schedule(const Schedule& s, size_t k, One&& one, Fused&& fused, Scalar&& scalar) {
  if (const ScalarRun* r = s.scalars.run_of(k)) {
    if (k == r->first && !scalar(*r))
      for (size_t j = r->first; j <= r->last; ++j) one(j);
    return;
  }
  run_in_plan(s.fusion, k, one, fused);
}
// The schedule of `program`, made once and kept while the program lives
// (programs are immutable once traced).
std::shared_ptr<const Schedule> schedule_of(const ProgramPtr& program);

// Runs a whole program on one device's tensors.
Tensors run_program(const Program& program, const Tensors& args);
Tensors run_program(const ProgramPtr& program, Tensors args);  // by its cached schedule

// Runs a top-level program over global arrays.
// Its bit-visible XLA rewrites (runtime/xla_rewrites.h) and its schedule are
// worked out once per program.
std::vector<ArrayPtr> run_global_program(const ProgramPtr& program, const std::vector<ArrayPtr>& args);

// The mesh with Auto axes `program`'s values live on and the layout
// propagation gives each of its variables when it runs on `args` (what JAX's
// inspect_array_sharding reports inside jit); nullopt when there is no such mesh.
std::optional<std::pair<MeshPtr, std::vector<Spec>>> auto_layouts(const Program& program,
                                                                  const std::vector<ArrayPtr>& args);

// Applies `prim` outside any trace to global arrays typed `in`. As JAX
// compiles each eager operation, operands on a mesh with Auto axes go
// through sharding propagation (a program of one equation), so results keep
// the layouts XLA gives them; otherwise apply_primitive.
std::vector<ArrayPtr> apply_eagerly(const Primitive& prim, const std::vector<ArrayPtr>& args,
                                    const Avals& in, const Params& params, const Avals& out);

}  // namespace meshsim
