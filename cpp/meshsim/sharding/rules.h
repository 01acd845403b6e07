// Sharding in types: the generic machinery. Each primitive's own sharding rule
// (the spec it gives its outputs when its operands are sharded over Explicit
// mesh axes, with JAX's ShardingTypeError texts) and local plan (how it runs
// on each device's blocks, runtime/sharded.h) are set where it is registered
// (primitives/); this layer holds what they share: spellings, spec helpers,
// JAX's broadcasting rule for elementwise primitives, generic plans, and
// applying a primitive's rule after abstract_eval.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// The Python spellings JAX's messages use.
std::string py_entry(const AxisNames& entry);  // None, 'x', ('x', 'y')
std::string py_spec_tuple(const Spec& spec);   // ('x', None): tuple(spec)
std::string spec_repr(const Spec& spec);       // P('x', None)
std::string abstract_mesh_repr(const Mesh& mesh);
std::string type_sharding_repr(const Aval& a);  // NamedSharding(mesh=AbstractMesh(...), spec=P(...))

Spec pad_spec(Spec spec, size_t ndim);
// A spec parameter (Python passes a list of lists of axis names; an all-empty
// one arrives as ints); nullopt when absent or None.
std::optional<Spec> spec_param(const Params& params, const std::string& name);
bool is_replicated(const Spec& spec);
// Same axis names, sizes and types: JAX's AbstractMesh equality.
bool same_abstract_mesh(const Mesh& a, const Mesh& b);
// Same devices at the same positions: blocks can move between the two by position.
bool same_devices(const Mesh& a, const Mesh& b);
// The spec over `mesh`'s Explicit axes only (what a type shows).
Spec explicit_part(const Spec& spec, const Mesh& mesh, size_t ndim);

// Sets the outputs' mesh and spec from the inputs' types; infer_avals calls it
// after abstract_eval. Primitives with an `array_kernel` (shard_map, reshard)
// set their own in abstract_eval and are left alone.
void apply_sharding_rule(const Primitive& prim, const Avals& in, const Params& params, Avals& out);

// The local plan a primitive runs by on sharded operands (its own, or the
// elementwise default); nullopt: run on the assembled global value.
std::optional<LocalPlan> local_plan_for(const Primitive& prim, const Avals& in,
                                        const Params& params, const Avals& out);

// ---- building blocks of the primitives' rules -----------------------------------

using SpecRule = std::function<std::vector<Spec>(const Avals&, const Params&, const Avals&)>;
using PlanRule = std::function<std::optional<LocalPlan>(const Avals&, const Params&, const Avals&)>;

Spec spec_of(const Aval& a);  // a's spec padded to its rank
int64_t entry_size(const Mesh& mesh, const AxisNames& entry);  // devices along the entry's axes
bool in_list(const IntList& l, int64_t d);
Spec drop_dims(const Spec& s, const IntList& dims);
std::string sharding_list(const Avals& in);  // type_sharding_repr of each, comma-separated
// JAX's str_short(mesh_axis_types=True): float32[8@dp,8]({Explicit: ('dp', 'tp')}).
std::string str_with_axis_types(const Aval& a, const Mesh& mesh);
// The `out_sharding` param padded to `ndim`; nullopt when None.
std::optional<Spec> out_sharding_param(const Params& p, size_t ndim);
// The `out_sharding` JAX's transposes give an op that makes a cotangent: the
// primal's spec, when the primal is typed over a mesh with Explicit axes
// (outside shard_map bodies) and has no pending sums; nullopt otherwise.
std::optional<Spec> cotangent_out_sharding(const Aval& primal);

// Rules: the operand's spec (for each output); an operand dim named by param
// `param` must be unsharded (JAX's texts for reductions along an axis, or
// for sort); JAX's _get_sharding_for_varying_out_shape (slice, pad, ...).
std::vector<Spec> same_as_operand(const Avals& in, const Params&, const Avals& out);
SpecRule unsharded_dim_rule(std::string param, bool sort);
std::vector<Spec> varying_shape_rule(const std::string& what, const Aval& x, const Shape& out);
// Whether every sharded dim of `x` keeps its size in `out` (local per block).
bool sharded_dims_whole(const Aval& x, const Shape& out);

// Plans: every operand laid out as the result (elementwise); the operands'
// own layouts when `local` allows (nullptr: always); the operands' layouts
// with `shape_param` made the local block's shape; `dims` gathered whole.
LocalPlan elementwise_plan(const Avals& in, const Params& params, const Avals& out);
PlanRule elementwise_like();
PlanRule as_is_plan(std::function<bool(const Avals&, const Params&, const Avals&)> local);
PlanRule local_shape_plan(const std::string& shape_param);
std::optional<LocalPlan> gather_dims_plan(const Avals& in, const Params& p, const Avals& out,
                                          const IntList& dims);

}  // namespace meshsim
