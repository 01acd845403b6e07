// Sharding propagation over Auto mesh axes, modelled on Shardy (XLA's
// propagation): a program's values on a mesh with Auto axes get the layouts
// XLA would choose, and each equation the layouts of the operands it computes
// on; runtime/interpreter.cpp then partitions the program by them (each
// device computes its block; the reshards and all-reduces between are the
// collectives XLA inserts).
//
// Every primitive relates the dimensions of its operands and results through
// factors (ir/primitive.h `FactorMap`). Fixed layouts (the arguments', and
// the results of sharding constraints, reshards and shard_maps) flow forward
// and backward through the factors until nothing changes; an open value only
// gains axes. Where the values around an equation disagree about a factor,
// the layout of the largest of them wins (ties: the first operand), as
// Shardy's aggressive propagation resolves conflicts; a mesh axis shards at
// most one factor of an equation.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/ir/program.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"

namespace meshsim {

struct ShardingPlan;

// A sub-program of a control-flow equation (scan's body, while's predicate
// and body, cond's branches) that runs partitioned over the mesh: its own
// plan, and the layouts its inputs arrive in and its outputs must leave in on
// every call (a loop's carries come back laid out as they came).
struct SubProgramPlan {
  ProgramPtr program;
  std::shared_ptr<const ShardingPlan> plan;
  std::vector<Spec> in, out;
  int64_t copies = 1;  // SubProgramLinks::copies
};

struct ShardingPlan {
  std::vector<Spec> value;                 // per variable: its layout over the mesh (all axes)
  std::vector<std::vector<Spec>> operand;  // per equation: the layouts its operands are used in
  // Per equation: the layouts its results are computed in before they are
  // sliced locally to their values' layouts (a concatenate's or cumulative
  // scan's permuted dims are computed whole); empty when they are the same.
  // A later use needing fewer axes slices that whole result instead of
  // gathering, as XLA's simplifier folds a gather of a local slice.
  std::vector<std::vector<Spec>> computed;
  // Per equation: its sub-programs' plans when it is a control-flow equation
  // whose sub-programs run partitioned (communicating inside); empty when it
  // runs as one primitive (on blocks, or whole).
  std::vector<std::vector<SubProgramPlan>> sub;
};

// How a control-flow primitive's operands and results are its sub-programs'
// inputs and outputs, which Shardy propagates through as one program: a
// loop's carry is laid out alike as operand, sub-program input and output and
// result (the fixed point of its initial value and the body's result).
struct SubProgramLinks {
  ProgramPtr program;
  std::vector<int> in_operand;  // per input: the operand it receives (-1: none)
  std::vector<int> in_result;   // per input: the result it is carried into (-1: not carried)
  std::vector<int> out_result;  // per output: the result it becomes (-1: none, e.g. a predicate)
  // How many copies of it XLA's program text holds (a scan unrolled u times
  // of a longer length holds u in its loop body and the remainder's after).
  int64_t copies = 1;
};
struct ControlFlowLinks {
  std::vector<SubProgramLinks> programs;
  // Operands and results from these indices on are stacked along a leading
  // dim the sub-programs see one row of (scan's xs and ys).
  size_t stacked_operands = SIZE_MAX, stacked_results = SIZE_MAX;
};
// A control-flow primitive declares its links where it is registered
// (Primitive::sub_program_links); nullopt for any other primitive.
std::optional<ControlFlowLinks> sub_program_links(const Primitive& prim, const Params& params);

// The mesh with Auto axes and more than one device that `program`'s values
// live on; null when there is none (or values live on several meshes).
MeshPtr auto_mesh_of(const Program& program);

// `args`: each argument's layout over `mesh` (nullopt: the argument is not
// on `mesh`; it is used replicated).
// `results`: layouts the outputs must have (a sub-program's), when given.
ShardingPlan propagate_shardings(const Program& program, const Mesh& mesh,
                                 const std::vector<std::optional<Spec>>& args,
                                 const std::vector<std::optional<Spec>>& results = {});

// The factor map propagation uses for `prim`: its own, or the elementwise
// family's identity; nullopt when nothing flows through it.
std::optional<FactorMap> factors_of(const Primitive& prim, const Avals& in, const Params& params,
                                    const Avals& out);

// How the dimensions of `program`'s inputs and outputs correspond when each
// device computes it on its blocks alone: an input dim and an output dim
// share a factor when, through the equations' factor maps, the output's
// blocks come from the input's blocks only. Dims that some equation
// contracts, computes whole or would lay out unlike its partner have none.
// The factor map of primitives that call a sub-program (scan's body).
FactorMap program_factors(const Program& program);

// `program` as each device runs it on its own blocks, its inputs laid out
// over `mesh` as `in_specs` and every value as propagation lays it out:
// each equation's params made local by its local plan. nullopt when some
// equation would need communication (a reshard, a reduction of partial
// results, a collective). `out_specs` gets the outputs' layouts.
std::optional<ProgramPtr> local_program(const Program& program, const MeshPtr& mesh,
                                        const std::vector<Spec>& in_specs, std::vector<Spec>& out_specs);

// The factor map and local plan of a primitive that calls the sub-program in
// param `param` on its leading operands (remat2, custom_vjp_call): the
// program's own map, and the program made local when it needs no
// communication (operands beyond its inputs are unused: no factor, left as
// they are). The plan declines operands typed with Explicit axes.
FactorRule call_factors(std::string param);
PlanRule call_plan(std::string param);

// The sharding rule of a primitive that calls sub-programs (control flow, remat2,
// custom_vjp_call): its results have the types abstract_eval took from the
// sub-program's results, which were traced on the operands' sharded types, as JAX
// types them.
std::vector<Spec> sub_program_specs(const Avals& in, const Params& params, const Avals& out);

}  // namespace meshsim
