// Program: the typed, traced form of a function (a jaxpr). Variables are
// numbered; each has an Aval. Constants are variables bound to tensors.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// Where the user's code traced an equation, as JAX's source_info_util
// summarizes it: "file:line:column (function)"; null when not known.
using SourceInfo = std::shared_ptr<const std::string>;

struct Equation {
  const Primitive* prim;
  Params params;
  std::vector<int> inputs;   // variable ids
  std::vector<int> outputs;  // variable ids
  SourceInfo source_info = nullptr;
};

struct ShardingPlan;  // sharding/propagation.h

// The layouts propagation chose for a program, by its arguments' layouts
// (filled by the runtime; a copy of a program starts with none).
struct ShardingPlanCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const ShardingPlan>> plans;
  ShardingPlanCache() = default;
  ShardingPlanCache(const ShardingPlanCache&) {}
  ShardingPlanCache& operator=(const ShardingPlanCache&) { return *this; }
};

struct Program {
  std::vector<Aval> avals;   // indexed by variable id
  std::vector<int> constvars;
  std::vector<Tensor> consts;  // values of constvars
  std::vector<int> invars;
  std::vector<Equation> eqns;
  std::vector<int> outvars;
  std::string name;  // the traced function's name, for the profiler's host spans (may be empty)
  mutable ShardingPlanCache sharding_plans;

  int new_var(Aval aval) {
    avals.push_back(std::move(aval));
    return static_cast<int>(avals.size()) - 1;
  }
  Avals in_avals() const;
  Avals out_avals() const;
  // Text in JAX's jaxpr notation: { lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }
  std::string str() const;
};

// The sub-programs an equation's params hold (remat2's jaxpr, cond's branches, ...).
std::vector<const Program*> sub_programs(const Equation& e);
// Whether running `program` (or one of its sub-programs) executes a collective:
// then only the mesh executor can run it.
bool holds_collective(const Program& program);
bool calls_collective(const Equation& e);  // one of e's sub-programs does

}  // namespace meshsim
