// Reverse-mode autodiff of programs.
//
// `vjp_program` splits a traced program into a forward program (inputs ->
// outputs + residuals) and a backward program (output cotangents + residuals
// -> input cotangents). Both are built by tracing:
//   1. the forward trace F re-binds the equations that depend on a
//      differentiated input ("active" ones), keeping the inputs and outputs of
//      each in a tape;
//   2. the backward trace B, opened inside F, walks the tape in reverse and
//      applies each primitive's `vjp` rule (written with ir/ops.h). Whatever
//      forward value a rule reads is a tracer of F, which B captures: the
//      captures are exactly the residuals, and become extra outputs of F.
// Primitives holding a sub-program set `vjp_split` instead of `vjp`: it binds
// their forward into F and returns a closure that emits their backward into B
// (remat2 and custom_vjp_call below; shard_map transforms its body with
// `vjp_program` and binds shard_maps of the two halves).
//
// Checkpointing: `linearize` with a policy binds only primal values into F;
// the backward pass then re-runs the region inside B, reusing from F only the
// outputs of equations the policy saves (and the region's inputs), so the
// rest is recomputed rather than saved.
#pragma once
#include <functional>
#include <optional>

#include "meshsim/ir/trace.h"

namespace meshsim {

// Binds `program` at `args` into the current trace and returns its outputs
// with the backward pass (which gives nullopt for inactive inputs).
// `active[i]`: input i is differentiated (only inexact ones are). With a
// `remat_policy` (a policy name; "" = nothing_saveable) the region is
// checkpointed. The program must outlive the returned closure.
VjpSplit linearize(const Program& program, const Values& args, const std::vector<bool>& active,
                   const std::optional<std::string>& remat_policy = std::nullopt);

struct VjpPrograms {
  ProgramPtr fwd;  // program's inputs -> its outputs + residuals
  ProgramPtr bwd;  // cotangents of the outputs in `ct_in` + residuals -> cotangents of the inputs in `ct_out`
  int num_residuals = 0;
  std::vector<bool> ct_in;   // outputs that take a cotangent: out_mask and inexact
  std::vector<bool> ct_out;  // inputs that get one: wrt and inexact
};

// `wrt[i]`: differentiate with respect to input i; `out_mask[j]`: output j
// takes a cotangent (false for auxiliary outputs).
VjpPrograms vjp_program(const Program& program, const std::vector<bool>& wrt,
                        const std::vector<bool>& out_mask);

// Applies `program` to `args` equation by equation with `bind`: runs it on
// arrays, inlines it into the open trace otherwise.
Values eval_program(const Program& program, const Values& args);

// Drops equations none of whose outputs is read.
void dce(Program& program);

// Checkpoint policies. Built in: "" / "nothing_saveable", "everything_saveable",
// "dots_saveable" (= "checkpoint_dots"), "dots_with_no_batch_dims_saveable".
// Other names are asked of the evaluator installed for the duration of a
// transform (the Python layer's, for policies written in Python).
using PolicyEvaluator = std::function<bool(const std::string& policy, const Primitive& prim,
                                           const Avals& in, const Params& params)>;
bool is_saveable(const std::string& policy, const Primitive& prim, const Avals& in, const Params& params);

class ScopedPolicyEvaluator {
 public:
  explicit ScopedPolicyEvaluator(PolicyEvaluator f);
  ~ScopedPolicyEvaluator();
  ScopedPolicyEvaluator(const ScopedPolicyEvaluator&) = delete;
  ScopedPolicyEvaluator& operator=(const ScopedPolicyEvaluator&) = delete;

 private:
  PolicyEvaluator previous_;
};

}  // namespace meshsim
