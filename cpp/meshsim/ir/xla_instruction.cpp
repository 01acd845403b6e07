#include "meshsim/ir/xla_instruction.h"

#include <map>
#include <stdexcept>

namespace meshsim {
namespace {

// Filled while the primitives register (once, at import), read afterwards.
std::map<std::string, std::string>& instructions() {
  static std::map<std::string, std::string> declared;
  return declared;
}

}  // namespace

Primitive& lowers_to(Primitive& prim, std::string instruction) {
  if (prim.kind != Kind::Collective)
    throw std::logic_error("primitive '" + prim.name + "' (" + kind_name(prim.kind) +
                           "): only collectives lower to a collective instruction");
  if (!instructions().emplace(prim.name, std::move(instruction)).second)
    throw std::logic_error("primitive '" + prim.name + "' declares its instruction twice");
  return prim;
}

std::optional<std::string> xla_instruction(const std::string& primitive_name) {
  auto it = instructions().find(primitive_name);
  if (it == instructions().end()) return std::nullopt;
  return it->second;
}

}  // namespace meshsim
