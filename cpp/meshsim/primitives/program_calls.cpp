#include "meshsim/primitives/program_calls.h"

#include <string>

#include "meshsim/core/error.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/sharding/propagation.h"
#include "meshsim/transforms/batching.h"

namespace meshsim {

Avals call_avals(const char* prim, const Program& program, const Avals& in, size_t first, size_t count) {
  const Avals want = program.in_avals();
  if (count != want.size())
    fail<TypeError>(prim, " expects ", want.size(), " inputs for its program, got ", count);
  for (size_t i = 0; i < count; ++i)
    if (in[first + i].shape != want[i].shape || in[first + i].dtype != want[i].dtype)
      fail<TypeError>(prim, " input ", i, " has type ", in[first + i].str_short(), ", its program expects ",
                      want[i].str_short());
  return program.out_avals();
}

std::vector<bool> batched_flags(const BatchDims& dims, size_t first, size_t count) {
  std::vector<bool> flags;
  for (size_t i = first; i < first + count; ++i) flags.push_back(dims[i] != kNotBatched);
  return flags;
}

Values at_front(const BatchArgs& a, const std::vector<bool>& batched) {
  Values in;
  for (size_t i = 0; i < a.in.size(); ++i)
    in.push_back(batched[i] ? batch_at(a.in[i], a.dims[i], 0, a.size) : a.in[i]);
  return in;
}

Primitive program_call(const char* name, const char* param) {
  Primitive p;
  p.name = name;
  p.operands = at_least(0);  // as many as its program's inputs (call_avals checks them)
  p.kind = Kind::HigherOrder;
  p.sub_program_params = {param};
  p.factors = call_factors(param);
  p.local_plan = call_plan(param);
  p.sharding_rule = sub_program_specs;
  p.vma_from_abstract_eval = true;
  p.abstract_eval = [name, key = std::string(param)](const Avals& in, const Params& params) {
    return call_avals(name, *params.get<ProgramPtr>(key), in, 0, in.size());
  };
  p.kernel = [key = std::string(param)](const Tensors& in, const Params& params, const Avals&) {
    return run_program(params.get<ProgramPtr>(key), in);
  };
  p.mesh_call = [key = std::string(param)](const MeshContext& mesh, const std::vector<Tensors>& in,
                                           const Params& params, const Avals&) {
    return run_on_mesh(params.get<ProgramPtr>(key), mesh, in);
  };
  return p;
}

}  // namespace meshsim
