// Elementwise fusion inside a program: a run of float32 elementwise
// equations on one shape executes as one loop over tiles, each tile going
// through the whole chain while it is in cache. The run's equations need not
// be adjacent: it executes where its last one stands, so the equations
// between them may not read its values. Values read only inside the run never
// get a buffer of their own; the others are written tile by tile into their
// buffers. Each equation's tile is computed by the loop its own kernel runs on
// contiguous operands (declared by the primitive), so a fused run gives
// the same bits as the equations one by one.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshsim/ir/program.h"

namespace meshsim {

struct FusedGroup {
  struct Step {
    const FusionTile* tile;
    int operand[3];  // value ids: [0, inputs.size()) the run's inputs, then the results in order
  };
  std::vector<size_t> members;       // its equations, in program order
  Shape shape;
  int64_t size;
  std::vector<int> inputs;           // variables read from outside the run
  std::vector<char> scalar_input;    // per input: a scalar beside a shaped run
  std::vector<int> results;          // per step: the variable it computes
  std::vector<char> kept;            // per step: its result is read after the run
  std::vector<Step> steps;
};

// The fusable runs of a program: at least two equations each, or one equation
// large enough to be split over threads.
class FusionPlan {
 public:
  FusionPlan(const Program& program, const std::vector<int>& last);
  bool empty() const { return groups_.empty(); }
  // The run equation k belongs to, or nullptr.
  const FusedGroup* run_of(size_t k) const { return role_[k] >= 0 ? &groups_[role_[k]] : nullptr; }

 private:
  std::vector<FusedGroup> groups_;
  std::vector<int> role_;  // per equation: index of its run, -1 for none
};

// Computes `g` from its inputs' tensors into `results` (one per kept step,
// in step order); false, having computed nothing, when an operand's layout
// rules the fused loop out (the caller then runs the equations one by one).
bool run_fused_group(const FusedGroup& g, const Tensor* const* inputs, Tensor* results);

// Whether fusion applies now (not while a profiler records each equation).
bool fusion_enabled();

// Runs group `g` on the slots `value(var)` of one device's values and frees
// what its equations read last (`freed`: the schedule's lists); false when
// the caller must run the equations one by one.
template <class Slot>
bool run_fused(const FusedGroup& g, const std::vector<std::vector<int>>& freed, Slot&& value) {
  thread_local std::vector<const Tensor*> inputs;
  thread_local std::vector<Tensor> results;
  inputs.clear();
  for (int v : g.inputs) inputs.push_back(&value(v));
  results.resize(g.steps.size());
  if (!run_fused_group(g, inputs.data(), results.data())) return false;
  for (size_t s = 0; s < g.steps.size(); ++s)
    if (g.kept[s]) value(g.results[s]) = std::move(results[s]);
  for (size_t k : g.members)
    for (int v : freed[k]) value(v) = Tensor();
  return true;
}

// Runs equation k of a program whose fusion plan is `plan`, where the
// executor's loop reaches it: an equation of a fused run waits for the run's
// last one, which runs them all, fused or (when `run_fused` declines) one by
// one in order. `one(j)` runs equation j alone, `fused(g)` tries run_fused.
template <class One, class Fused>
void run_in_plan(const FusionPlan& plan, size_t k, One&& one, Fused&& fused) {
  const FusedGroup* g = plan.run_of(k);
  if (!g) return one(k);
  if (k != g->members.back()) return;
  if (!fused(*g))
    for (size_t j : g->members) one(j);
}

}  // namespace meshsim
