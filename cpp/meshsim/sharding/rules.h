// Sharding in types: the spec every primitive gives its outputs when its
// operands are sharded over Explicit mesh axes (JAX's sharding rules, with
// JAX's ShardingTypeError texts), and the shard-local plans that execute them
// (runtime/sharded.h).
#pragma once
#include <map>
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

// Gives primitives of every family their sharding rules and local plans;
// called once after the families registered (ir/primitive.cpp).
void install_sharding_rules(std::map<std::string, Primitive>& table);

}  // namespace meshsim
