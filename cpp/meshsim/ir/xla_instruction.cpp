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

const Primitive& partials_all_reduce(const std::string& reduction) {
  // Read after the registry is filled (at import, before any program runs).
  static const std::map<std::string, const Primitive*> declared = [] {
    std::map<std::string, const Primitive*> m;
    for (const std::string& name : primitive_names()) {
      const Primitive& p = primitive(name);
      if (p.is_collective() && !p.partials_reduction.empty()) m[p.partials_reduction] = &p;
    }
    return m;
  }();
  const auto it = declared.find(reduction);
  if (it == declared.end()) throw std::logic_error("no collective combines partial results by '" + reduction + "'");
  return *it->second;
}

}  // namespace meshsim
