// Primitive: one operation and every rule about it, declared in one place.
//
// A primitive trusts its inputs only after `abstract_eval` accepted them: that
// rule computes the output types and raises ValueError/TypeError naming the
// dimension or argument at fault. `kernel` then runs on one device's local
// blocks. The remaining hooks are filled in as the roadmap adds VMA typing,
// sharding-in-types, autodiff and cost accounting.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "meshsim/core/aval.h"
#include "meshsim/core/tensor.h"
#include "meshsim/ir/params.h"

namespace meshsim {

using Avals = std::vector<Aval>;
using Tensors = std::vector<Tensor>;

struct Primitive {
  std::string name;  // JAX's name, e.g. "dot_general", "all_gather"
  std::function<Avals(const Avals& in, const Params& params)> abstract_eval;
  std::function<Tensors(const Tensors& in, const Params& params, const Avals& out)> kernel;

  // Output VMA from input types; unset means JAX's standard rule (inputs are
  // implicitly pvary'd to the union of their VMAs, which the output keeps).
  std::function<AxisNames(const Avals& in, const Params& params)> vma_rule;
  bool is_collective = false;  // needs all devices of its axes at once
};

// The process-wide table of primitives, filled on first use.
const Primitive& primitive(const std::string& name);
void register_primitive(Primitive prim);
std::vector<std::string> primitive_names();

// Builds an Aval with the given shape/dtype and the (first) input's VMA.
Aval like(const Aval& in, Shape shape, DType dtype, bool weak_type = false);

}  // namespace meshsim
