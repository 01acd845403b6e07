#include "meshsim/ir/primitive.h"

#include <map>
#include <mutex>
#include <stdexcept>


namespace meshsim {
namespace {

std::map<std::string, Primitive>& table() {
  static std::map<std::string, Primitive> t;
  return t;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Local: return "local";
    case Kind::Collective: return "collective";
    case Kind::HigherOrder: return "higher-order";
    case Kind::ControlFlow: return "control flow";
    case Kind::Global: return "global";
  }
  return "?";
}

bool OperandCount::admits(size_t n) const {
  return n >= static_cast<size_t>(min) && (max == kAnyNumber || n <= static_cast<size_t>(max));
}

std::string OperandCount::str() const {
  auto operands = [](int n) { return std::to_string(n) + (n == 1 ? " operand" : " operands"); };
  if (max == kAnyNumber) return "at least " + operands(min);
  if (max == min) return operands(min);
  return std::to_string(min) + " to " + operands(max);
}

bool Traffic::moves_data() const {
  for (int64_t b : sent)
    if (b) return true;
  for (int64_t b : received)
    if (b) return true;
  return false;
}

void Primitive::validate() const {
  auto bad = [&](const std::string& why) {
    throw std::logic_error("primitive '" + name + "' (" + kind_name(kind) + "): " + why);
  };
  if (name.empty()) throw std::logic_error("a primitive needs a name");
  if (!abstract_eval) bad("no abstract_eval");
  if (fixed_result_specs && kind != Kind::Global) bad("only global primitives fix their results' layouts");
  // A collective may also have a `kernel` for calls outside shard_map (host callbacks).
  const int hooks = bool(kernel) + bool(mesh_kernel) + bool(array_kernel) -
                    (kind == Kind::Collective && kernel && mesh_kernel);
  const bool calls = kind == Kind::HigherOrder || kind == Kind::ControlFlow;
  if (passes_through) {
    if (kind != Kind::Local) bad("only local primitives pass their operands through");
    if (hooks != 0) bad("passes its operands through: it has no kernel, mesh_kernel or array_kernel");
  } else if (hooks != 1) {
    bad("needs exactly one of kernel, mesh_kernel and array_kernel");
  }
  if ((kind == Kind::Local || calls) && !kernel && !passes_through) bad("runs by `kernel`");
  if (kind == Kind::Collective && !mesh_kernel) bad("runs by `mesh_kernel`");
  if (kind == Kind::Global && !array_kernel) bad("runs by `array_kernel`");
  if (calls != bool(mesh_call)) bad(calls ? "needs `mesh_call` for sub-programs holding collectives"
                                          : "only higher-order primitives have `mesh_call`");
  const bool comm_model = comm && comm_bytes && comm_steps;
  if (kind == Kind::Collective && !comm_model)
    bad("a collective needs a communication model (`comm`, `comm_bytes` and `comm_steps`)");
  if (kind != Kind::Collective && (comm || comm_bytes || comm_steps))
    bad("only collectives have a communication model");
  if (vjp && vjp_split) bad("sets both `vjp` and `vjp_split`");
  if (elementwise && kind != Kind::Local) bad("only local primitives are elementwise");
  if (layout_only && kind != Kind::Global) bad("only global primitives change the layout alone");
  if (!xla_instruction.empty() && kind != Kind::Collective)
    bad("only collectives lower to a collective instruction");
  if (!partials_reduction.empty()) {
    const std::string& r = partials_reduction;
    if (r != "sum" && r != "max" && r != "min" && r != "prod") bad("unknown reduction '" + r + "'");
    if (kind == Kind::Collective && (xla_instruction != "all-reduce" || r == "prod"))
      bad("combines partial results but does not lower to an all-reduce by sum, max or min");
    if (kind != Kind::Collective && kind != Kind::Local) bad("only reductions and all-reduces combine partial results");
  }
  if (!bf16_widened_once && !elementwise) bad("only elementwise primitives declare how bfloat16 is computed");
  if ((kind == Kind::ControlFlow) != bool(sub_program_links))
    bad(kind == Kind::ControlFlow ? "needs `sub_program_links` for sharding propagation"
                                  : "only control-flow primitives link sub-programs to operands");
  if (float_tile.loop && (!elementwise || float_tile.arity < 1))
    bad("only elementwise primitives of one or more operands have a float32 fusion loop");
  if (int_scalar_op.op && (kind != Kind::Local || passes_through))
    bad("only local primitives with a kernel have a scalar op");
  if (saved_as_dot && kind != Kind::Local) bad("only local products are saved as dots");
  if ((fma_product || fma_sum || commutative) && !elementwise)
    bad("only elementwise primitives contract into multiply-adds or commute");
  if (fma_sum < -1 || fma_sum > 1) bad("`fma_sum` is +1 (adds), -1 (subtracts) or 0");
  if (moves_elements && (kind != Kind::Local || elementwise))
    bad("only local primitives that are not elementwise move elements");
  if (prints_as_call && sub_program_params.empty()) bad("prints as a call without a sub-program");
  if ((regroups_dims || unmapped_dims_keep_sharding) && !factors)
    bad("declares how dimensions propagate without a factor map");
  if (retiles_through_other_dim && !unmapped_dims_keep_sharding)
    bad("retiles a dimension whose sharding it does not keep");
}

void register_primitive(Primitive prim) {
  prim.validate();
  if (prim.is_collective() && !prim.partials_reduction.empty())
    for (const auto& [other, p] : table())
      if (p.is_collective() && p.partials_reduction == prim.partials_reduction)
        throw std::logic_error("primitive '" + prim.name + "' and '" + other + "' both combine partial " +
                               prim.partials_reduction + "s");
  std::string name = prim.name;
  if (!table().emplace(name, std::move(prim)).second)
    throw std::logic_error("primitive '" + name + "' is registered twice");
}

const Primitive& primitive(const std::string& name) {
  auto it = table().find(name);
  if (it == table().end()) fail<NotImplementedError>("unknown primitive '", name, "'");
  return it->second;
}

std::vector<std::string> primitive_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : table()) names.push_back(k);
  return names;
}

namespace {
double nbytes(const Avals& avals) {
  double n = 0;
  for (const Aval& a : avals) n += static_cast<double>(num_elements(a.shape)) * itemsize(a.dtype);
  return n;
}
}  // namespace

Cost memory_cost(const Avals& in, const Avals& out) { return {0, nbytes(in) + nbytes(out)}; }

Cost cost_of(const Primitive& prim, const Avals& in, const Params& params, const Avals& out) {
  if (prim.cost) return prim.cost(in, params, out);
  if (prim.kind != Kind::Local && prim.kind != Kind::Collective) return {};
  Cost c = memory_cost(in, out);
  if (prim.elementwise)
    for (const Aval& a : out) c.flops += static_cast<double>(num_elements(a.shape));
  return c;
}

Aval like(const Aval& in, Shape shape, DType dtype, bool weak_type) {
  Aval a;
  a.shape = std::move(shape);
  a.dtype = dtype;
  a.weak_type = weak_type;
  a.vma = in.vma;
  return a;
}

}  // namespace meshsim
