// Primitive: one operation and every rule about it, declared in one place.
//
// A primitive trusts its inputs only after `abstract_eval` accepted them: that
// rule computes the output types and raises ValueError/TypeError naming the
// dimension or argument at fault. Its `kind` says how it executes (one
// execution hook per kind) and its traits what it is; every other rule
// (sharding, local plan, VJP, batching, cost, communication) is set where the
// primitive is registered, next to its kernel. `validate()` runs at
// registration and rejects definitions whose hooks contradict their kind.
#pragma once
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <variant>
#include <vector>

#include "meshsim/core/array.h"
#include "meshsim/core/aval.h"
#include "meshsim/core/tensor.h"
#include "meshsim/ir/params.h"

namespace meshsim {

using Avals = std::vector<Aval>;
using Tensors = std::vector<Tensor>;
class MeshContext;  // runtime/mesh_executor.h: the devices a collective spans

// A value a primitive is applied to: an array, or a variable of an open trace
// (ir/trace.h).
struct Tracer;
using TracerPtr = std::shared_ptr<Tracer>;
using Value = std::variant<ArrayPtr, TracerPtr>;
using Values = std::vector<Value>;
// A cotangent in reverse-mode autodiff; nullopt is a symbolic zero.
using Cotangent = std::optional<Value>;
using Cotangents = std::vector<Cotangent>;

// What a VJP rule sees: the forward pass's inputs and outputs, the outputs'
// cotangents (some may be symbolic zeros, not all) and which inputs want one.
struct VjpArgs {
  const Values& in;
  const Values& out;
  const Cotangents& ct;
  const Params& params;
  const std::vector<bool>& wants;
};

// A forward pass already bound into the current trace, and its backward pass
// to run later inside the backward trace (transforms/vjp.h).
struct VjpSplit {
  Values out;
  std::function<Cotangents(const Cotangents& out_ct)> backward;
};

// How a primitive runs on sharded operands with every device computing only
// its own block (runtime/sharded.h): operands are first resharded to
// `in_specs` (collectives, counted), the kernel runs on each device's blocks
// with `params` (shapes made local), its results are laid out as `out_specs`
// and, when `reduce_axes` is set, hold partial results that are all-reduced
// over those mesh axes ("sum", "max" or "min").
struct LocalPlan {
  std::vector<Spec> in_specs;
  Params params;
  std::vector<Spec> out_specs;
  AxisNames reduce_axes;
  std::string reduce_op = "sum";
};

// Sharding propagation over Auto mesh axes (sharding/propagation.h), as
// Shardy models an operation: every dimension of every operand and result is
// one "factor" (or none, kNoFactor: that dimension is computed whole). Dims
// sharing a factor are sharded alike; a factor found in operands only is
// contracted: sharding it leaves partial results that the primitive's
// local plan combines (summed for a sum, a dot; max for a max).
constexpr int kNoFactor = -1;
struct FactorMap {
  std::vector<std::vector<int>> in, out;  // per operand / result, per dimension
  int num_factors = 0;
};

// What one application of a primitive costs on one device, for the cost
// model (meshsim.profiler.estimate): floating-point operations and bytes read
// from and written to memory, as XLA's cost analysis counts them ("flops",
// "bytes accessed"). Communication is not a cost: collectives report the bytes
// they move per device in their CollectiveRecord (runtime/sharded.h).
struct Cost {
  double flops = 0;
  double bytes_accessed = 0;
};

// Batching (vmap, transforms/batching.h). Each value's batch dimension, or
// kNotBatched; `size` is the length of the batch.
constexpr int64_t kNotBatched = -1;
using BatchDims = std::vector<int64_t>;
struct Primitive;
struct BatchArgs {
  const Primitive& prim;
  const Values& in;
  const BatchDims& dims;  // at least one is batched when a rule is called
  const Params& params;
  int64_t size;
};
// The batched application's outputs and where each carries the batch.
struct Batched {
  Values out;
  BatchDims dims;
};

// Elementwise fusion (runtime/fusion.h): the loop a float32 elementwise kernel
// runs on `n` contiguous elements of each of its `arity` operands (in[i] points
// at operand i's), so a fused run gives the kernel's bits. `dense_only`: the
// kernel depends on an operand's layout (div by a stride-0 divisor multiplies
// by its reciprocal), so operands from outside a run must be contiguous.
struct FusionTile {
  int arity = 0;
  std::function<void(const float* const* in, float* out, int64_t n)> loop;
  bool dense_only = false;
};

// Runs of scalar equations computed in registers (runtime/scalar_runs.h): the
// op a kernel applies to one element of 0-d int32 operands (a bool read as 0
// or 1), `arity` of them (-1: any number). `selection`: operand 0 is int32 or
// bool and the others of the result's dtype (select_n); otherwise every
// operand is int32.
struct IntRegisterOp {
  int arity = 0;
  bool selection = false;
  std::function<int32_t(const int32_t* in, int arity)> op;
};

struct Program;           // ir/program.h
struct PrintedEquation;   // ir/printing.h
struct XlaRewriteSite;    // runtime/xla_rewrites.h
struct ControlFlowLinks;  // sharding/propagation.h

// How a primitive executes, declared at registration (not inferred from hooks).
enum class Kind {
  Local,        // `kernel` on one device's blocks
  Collective,   // `mesh_kernel` over every device of a shard_map's mesh, with a `comm` model
  HigherOrder,  // calls a sub-program (remat2, custom_vjp_call): `kernel` and `mesh_call`
  ControlFlow,  // cond, while, scan: `kernel` and `mesh_call`
  Global,       // sees whole sharded arrays (shard_map, reshard): `array_kernel`
};
const char* kind_name(Kind kind);

// What one application of a collective moves between the devices of its mesh
// (by mesh position): the replica groups, the bytes each device sends and
// receives, and the algorithm's sequential steps (each costs one link latency:
// a ring all-gather n-1, a ring all-reduce 2(n-1), a permutation 1).
struct Traffic {
  AxisNames axes;
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> sent, received;
  int64_t steps = 0;
  bool moves_data() const;
};

// How many operands one application takes: `min` up to `max` (kAnyNumber: no
// upper bound). Shape rules and kernels index their operands without counting
// them, so infer_avals checks the count first; unset (`min` < 0) it checks
// nothing, and the registry test fails on such a primitive.
struct OperandCount {
  static constexpr int kAnyNumber = -1;
  int min = -1;
  int max = kAnyNumber;
  bool declared() const { return min >= 0; }
  bool admits(size_t n) const;
  std::string str() const;  // "2 operands", "at least 1 operand", "1 to 3 operands"
};
inline OperandCount exactly(int n) { return {n, n}; }
inline OperandCount at_least(int n) { return {n, OperandCount::kAnyNumber}; }

struct Primitive {
  std::string name;  // JAX's name, e.g. "dot_general", "all_gather"
  Kind kind = Kind::Local;
  // Traits. `elementwise`: the same function of each element of operands of
  // one shape (JAX's broadcasting sharding rule, the elementwise batching
  // rule and one flop per output element are its defaults).
  bool elementwise = false;
  // Calls BLAS (the executor keeps BLAS single-threaded for small products).
  bool uses_blas = false;
  // JAX types the result as an operand buffer without checking that the
  // devices' blocks match that type (ragged_all_to_all): the executor decides
  // which devices share a block from the buffers, not the type.
  bool result_vma_unchecked = false;
  // The value passes through unchanged at run time; only its type changes
  // (pvary: invariant -> varying; stop_gradient: what autodiff sees). Such a
  // primitive has no execution hook: the executors hand each operand's buffer
  // through as the result, with no copy and no kernel call. One result per
  // operand, of the operand's shape and dtype.
  bool passes_through = false;
  // A Global primitive that changes where a value lives, not what it is
  // (reshard, sharding_constraint, mesh_cast): on a whole value (a
  // sub-program run on assembled operands) the executors pass it through.
  bool layout_only = false;
  // A collective's XLA instruction ("all-reduce", "all-gather", "reduce-scatter",
  // "all-to-all", "ragged-all-to-all", "collective-permute",
  // "collective-broadcast"); empty for a collective that moves no data
  // (axis_index, host callbacks) and every other kind. Compiled text names the
  // collective by it and the step-time model picks a platform's algorithm by it
  // (set with `lowers_to`, ir/xla_instruction.h).
  std::string xla_instruction;
  // How partial results combine across devices ("sum", "max", "min" or "prod").
  // On an all-reduce collective (psum, pmax, pmin): the one that combines a local
  // plan's partial results by that reduction (the sharded executor runs and
  // records it for them; one collective per reduction). On a reduction over axes
  // (reduce_sum, argmax, ...): how XLA all-reduces the partial results of blocks
  // split along a reduced dimension (the memory and step-time model's implicit
  // collective). Empty on everything else.
  std::string partials_reduction;
  // Elementwise only: XLA computes its bfloat16 result as the float32 function
  // rounded once, so a convert of that result back to float32 reads the
  // unrounded value (runtime/xla_rewrites.h). False where XLA works in the narrow
  // type (integer_pow squares in bfloat16, logistic expands step by step),
  // on the bits (nextafter, bitcast_convert_type) or moves values as they are
  // (conversions, select_n, clamp, copy).
  bool bf16_widened_once = true;

  // Sharding propagation over Auto mesh axes (sharding/propagation.h), beyond
  // the factor map. `regroups_dims`: a dimension whose factor is shared with a
  // dimension of another size is split into (or merged from) parts, one factor
  // per part, major first (Shardy's reshape rule: reshape).
  bool regroups_dims = false;
  // Dimensions its factor map leaves without a factor, at one position in every
  // operand and the result, keep their sharding from operands to result but
  // are computed whole: gathered in the operands, the result sliced locally
  // (Shardy's permutation factors: concatenate, slice, the cumulative scans).
  bool unmapped_dims_keep_sharding = false;
  // Computes such a split dimension by moving its axes to another dimension
  // whose blocks they divide, around the local operation (all-to-alls), rather
  // than gathering it: XLA's concatenate.
  bool retiles_through_other_dim = false;
  // Results whose layout the primitive decides from its params, whatever its
  // operands' (reshard and sharding_constraint: `spec`; shard_map:
  // `out_specs`): propagation takes them as fixed. Unset: none.
  std::function<std::vector<Spec>(const Params& params)> fixed_result_specs;

  // XLA's buffer assignment (the memory model of planning.py). `fused_into_readers`:
  // XLA recomputes its result inside readers that fuse it, so it needs no
  // buffer of its own (elementwise primitives always are). `fuses_operands`: a
  // reader that does (every fused and elementwise primitive, reductions, ...).
  // `result_is_operand_view`: its result is its (first) operand's buffer viewed anew.
  bool fused_into_readers = false;
  bool fuses_operands = false;
  bool result_is_operand_view = false;
  // Runs for its effects (host callbacks): kept when nothing reads its results.
  bool has_effects = false;
  // The params holding its sub-programs (scan: "jaxpr"; while: "cond_jaxpr",
  // "body_jaxpr"), for passes that walk into them.
  std::vector<std::string> sub_program_params;
  // Sharding propagation into its sub-programs (sharding/propagation.h): which
  // of its operands and results each sub-program's inputs and outputs are.
  // Required on control-flow primitives; nullopt: the params leave no link.
  std::function<std::optional<ControlFlowLinks>(const Params& params)> sub_program_links;

  // Fast paths of the executors, each giving the kernel's bits: its float32
  // loop for elementwise fusion, its op on 0-d int32 operands for scalar runs.
  // Unset (`loop`/`op` empty): it does not join fused or scalar runs.
  FusionTile float_tile;
  IntRegisterOp int_scalar_op;
  // How XLA's CPU compiler changes its equations where the change shows in the
  // bits of results (runtime/xla_rewrites.h): with `site.compiled` set, appends
  // the equations XLA computes instead and returns true; returns false to keep
  // the equation as traced (without writing anything when `site.compiled` is null).
  std::function<bool(const XlaRewriteSite& site)> xla_rewrite;
  // XLA's CPU code contracts a float32/float64 product into the sum reading it,
  // one fused multiply-add (runtime/xla_rewrites.h). `fma_product`: whether
  // this application multiplies its operands (one operand: by itself; integer_pow
  // only for y == 2). `fma_sum`: +1 adds its two operands, -1 subtracts the
  // second from the first, 0 neither.
  std::function<bool(const Params& params)> fma_product;
  int fma_sum = 0;
  // Its operands in either order give the same result (XLA's common
  // subexpression elimination matches them so).
  bool commutative = false;
  // Each result element is an operand element placed by the params alone
  // (reshape, transpose, slice, rev, squeeze, broadcast_in_dim): XLA's loop
  // fusion computes it inside its reader's loop.
  bool moves_elements = false;
  // jax.checkpoint_policies' dots policies (transforms/vjp.h): set on the
  // products `dots_saveable` saves (dot_general, conv_general_dilated); returns
  // whether `dots_with_no_batch_dims_saveable` also saves this application.
  std::function<bool(const Params& params)> saved_as_dot;

  // The jaxpr printer (ir/printing.h): JAX's pp rule, where JAX prints the
  // equation otherwise than its params as stored (another name, params hidden,
  // added or spelled in JAX's form). Unset: the stored params under its name.
  std::function<void(PrintedEquation& eqn)> print_rule;
  // JAX prints it as a call of its sub-program (jit): `name` first, the
  // callee's variables named after the operands and results they stand for.
  bool prints_as_call = false;

  OperandCount operands;  // checked by infer_avals before abstract_eval runs
  std::function<Avals(const Avals& in, const Params& params)> abstract_eval;
  std::function<Tensors(const Tensors& in, const Params& params, const Avals& out)> kernel;

  // Output VMA from input types; unset means JAX's standard rule (inputs are
  // implicitly pvary'd to the union of their VMAs, which the output keeps).
  std::function<AxisNames(const Avals& in, const Params& params)> vma_rule;
  // Higher-order primitives that call a sub-program traced on their operands'
  // exact types (remat2, custom_vjp_call): operands are not pvary'd, and each
  // output keeps the VMA `abstract_eval` gives it (the sub-program's).
  bool vma_from_abstract_eval = false;

  // Collectives (and axis_index) run as one call over every device of a
  // shard_map's mesh: `in[pos]` are the inputs of the device at mesh position
  // `pos`; returns each device's outputs. Set instead of `kernel`.
  std::function<std::vector<Tensors>(const MeshContext& mesh, const std::vector<Tensors>& in,
                                     const Params& params, const Avals& out)>
      mesh_kernel;
  bool is_collective() const { return kind == Kind::Collective; }
  // The collective's communication model, from the run-time operands of every
  // device (`in[pos]`, so data-dependent sizes such as ragged_all_to_all's
  // send_sizes count) and the params. Required on every collective.
  std::function<Traffic(const MeshContext& mesh, const std::vector<Tensors>& in,
                        const Params& params, const Avals& out)>
      comm;
  // The bytes each device sends in one application over groups of `n`
  // devices, from the types alone (abstract compilation): exact where the
  // sizes are static, a bound where `comm` reads them at run time.
  std::function<int64_t(const Avals& in, const Avals& out, int64_t n)> comm_bytes;
  // The algorithm's sequential steps over a group of `n` > 1 devices (each
  // costs one link latency): what the cost model charges and what `comm`
  // reports as Traffic::steps.
  std::function<int64_t(int64_t n)> comm_steps;
  // Higher-order primitives (remat2, custom_vjp_call, cond, while, scan) whose
  // sub-programs hold collectives: run over every device at once, each
  // sub-program call by the mesh executor (run_on_mesh). The executor uses it
  // instead of `kernel` for such equations.
  std::function<std::vector<Tensors>(const MeshContext& mesh, const std::vector<Tensors>& in,
                                     const Params& params, const Avals& out)>
      mesh_call;

  // Pending reductions (Aval::unreduced/reduced, ir/unreduced.h): every output's unreduced
  // and reduced axes from the inputs' types; raises JAX's NotImplementedError or
  // ShardingTypeError. Unset on a Local or Collective primitive: JAX's default rule (an
  // unreduced operand is refused; reduced axes pass through when every operand agrees);
  // other kinds keep the types abstract_eval gives (their sub-program's or params').
  std::function<std::pair<AxisNames, AxisNames>(const Avals& in, const Params& params)> ur_rule;

  // Sharding in types (Explicit mesh axes, sharding/rules.h): the outputs'
  // specs from the inputs' types (mesh + spec), the params and the outputs'
  // shapes; raises ShardingTypeError. Unset: JAX's broadcasting rule for an
  // elementwise primitive, otherwise "not implemented".
  std::function<std::vector<Spec>(const Avals& in, const Params& params, const Avals& out)>
      sharding_rule;
  // Shard-local execution for sharded operands; nullopt (or unset, for a
  // non-elementwise primitive) runs the kernel on the assembled global value.
  std::function<std::optional<LocalPlan>(const Avals& in, const Params& params, const Avals& out)>
      local_plan;
  // Sharding propagation over Auto mesh axes (sharding/propagation.h): how
  // the dimensions of operands and results correspond. Unset on an
  // elementwise primitive: the identity map (dimension d of every operand and
  // result is factor d); otherwise unset or nullopt: nothing flows through
  // and the results are computed on whole operands.
  std::function<std::optional<FactorMap>(const Avals& in, const Params& params, const Avals& out)>
      factors;

  // Primitives over whole sharded arrays (shard_map): see every input's
  // sharding and return arrays laid out over the mesh. Set instead of `kernel`.
  std::function<std::vector<ArrayPtr>(const std::vector<ArrayPtr>& in, const Params& params,
                                      const Avals& out)>
      array_kernel;

  // Reverse-mode autodiff (transforms/vjp.h): the inputs' cotangents, written
  // with ir/ops.h so that it traces and is itself differentiable. Returns
  // nullopt for inputs that do not want one or are not differentiable. Unset:
  // "Differentiation rule for '<name>' not implemented".
  std::function<Cotangents(const VjpArgs& args)> vjp;
  // Instead of `vjp`, for primitives holding a sub-program (remat2,
  // custom_vjp_call, shard_map): binds the forward pass into the current trace
  // and returns its outputs plus the backward pass. `active[i]`: input i is
  // being differentiated.
  std::function<VjpSplit(const Values& in, const std::vector<bool>& active, const Params& params)>
      vjp_split;
  // The outputs' derivative is zero whatever the inputs (stop_gradient, floor, sign, ...):
  // JAX's symbolic zero, so what is computed from them is not differentiated at all.
  bool zero_derivative = false;

  // Cost of one application on operands typed `in` (local blocks inside a
  // shard_map body). Unset: `default_cost`.
  std::function<Cost(const Avals& in, const Params& params, const Avals& out)> cost;
  // Batching (vmap): binds the primitive applied to every example at once,
  // written with ir/ops.h. Inputs come with their batch dimension (or
  // kNotBatched); returns the outputs and theirs. Unset: the elementwise
  // family's rule for primitives tagged `elementwise`, otherwise the
  // per-example fallback (correct, one bind per example).
  std::function<Batched(const BatchArgs& args)> batch;

  // Raises std::logic_error naming the primitive when its hooks contradict its
  // kind: exactly one execution hook (the kind's; none when it passes its
  // operands through), a `comm` model exactly on collectives, `mesh_call` exactly on higher-order and control-flow
  // primitives, at most one of `vjp`/`vjp_split`, traits that fit the kind
  // (fast paths only on local primitives, sub-program links exactly on control flow).
  void validate() const;
};

// Every operand read and every result written once, no flops: data movement
// (reshape, slice, transpose, gather, ...), the default for primitives that
// are not elementwise.
Cost memory_cost(const Avals& in, const Avals& out);
// `prim.cost`, or when unset: memory_cost plus, for elementwise primitives,
// one flop per output element. Primitives that run a sub-program (remat2,
// custom_vjp_call, shard_map: they set `vjp_split`) cost nothing themselves:
// the sub-program's equations are costed as they run.
Cost cost_of(const Primitive& prim, const Avals& in, const Params& params, const Avals& out);

// The process-wide table of primitives, filled on first use. Python reads
// the same table (meshsim._core.primitive_names), so a name is spelled once.
const Primitive& primitive(const std::string& name);
// Validates `prim` and adds it; raises on an invalid or duplicate definition.
void register_primitive(Primitive prim);
std::vector<std::string> primitive_names();

// Builds an Aval with the given shape/dtype and the (first) input's VMA.
Aval like(const Aval& in, Shape shape, DType dtype, bool weak_type = false);

}  // namespace meshsim
