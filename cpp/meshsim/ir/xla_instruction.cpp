#include "meshsim/ir/xla_instruction.h"

#include <map>
#include <stdexcept>

namespace meshsim {

Primitive& lowers_to(Primitive& prim, std::string instruction) {
  if (!prim.xla_instruction.empty())
    throw std::logic_error("primitive '" + prim.name + "' declares its instruction twice");
  prim.xla_instruction = std::move(instruction);
  return prim;
}

std::optional<std::string> xla_instruction(const std::string& primitive_name) {
  const std::string& declared = primitive(primitive_name).xla_instruction;
  if (declared.empty()) return std::nullopt;
  return declared;
}

namespace {
// reduction -> the collective that combines partial results with it. Filled
// while the registry is (at import, before any program runs), read after.
std::map<std::string, std::string>& partials_table() {
  static std::map<std::string, std::string> t;
  return t;
}
}  // namespace

Primitive& combines_partials(Primitive& prim, std::string reduction) {
  if (prim.xla_instruction != "all-reduce")
    throw std::logic_error("primitive '" + prim.name + "' combines partial results but does not lower to an all-reduce");
  if (reduction != "sum" && reduction != "max" && reduction != "min")
    throw std::logic_error("primitive '" + prim.name + "': unknown reduction '" + reduction + "'");
  auto [it, fresh] = partials_table().emplace(std::move(reduction), prim.name);
  if (!fresh)
    throw std::logic_error("primitive '" + prim.name + "' and '" + it->second + "' both combine partial " +
                           it->first + "s");
  return prim;
}

const Primitive& partials_all_reduce(const std::string& reduction) {
  const auto it = partials_table().find(reduction);
  if (it == partials_table().end())
    throw std::logic_error("no collective combines partial results by '" + reduction + "'");
  return primitive(it->second);
}

bool is_partials_all_reduce(const std::string& primitive_name) {
  for (const auto& [reduction, name] : partials_table())
    if (name == primitive_name) return true;
  return false;
}

}  // namespace meshsim
