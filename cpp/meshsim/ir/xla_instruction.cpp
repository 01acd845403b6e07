#include "meshsim/ir/xla_instruction.h"

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

}  // namespace meshsim
