#include "meshsim/core/aval.h"

#include <sstream>

namespace meshsim {

bool Aval::same_type(const Aval& o) const {
  return shape == o.shape && dtype == o.dtype && weak_type == o.weak_type && vma == o.vma &&
         spec == o.spec && unreduced == o.unreduced && reduced == o.reduced;
}

std::string spec_entry_str(const AxisNames& axes) {
  if (axes.size() == 1) return axes[0];
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  return s + ")";
}

std::string Aval::str_short(bool short_dtype) const {
  std::ostringstream os;
  os << (short_dtype ? dtype_short_name(dtype) : dtype_name(dtype)) << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    os << (i ? "," : "") << shape[i];
    if (i < spec.size() && !spec[i].empty()) os << "@" << spec_entry_str(spec[i]);
  }
  os << "]";
  std::string states;  // JAX's {V:i, U:j, R:k}
  auto add_state = [&states](const char* tag, const AxisNames& axes) {
    if (!axes.empty()) states += (states.empty() ? "" : ", ") + std::string(tag) + spec_entry_str(axes);
  };
  add_state("V:", vma);
  add_state("U:", unreduced);
  add_state("R:", reduced);
  if (!states.empty()) os << "{" << states << "}";
  return os.str();
}

std::string Aval::str() const { return (weak_type ? "~" : "") + str_short(); }

std::string Aval::repr() const {
  return "ShapedArray(" + str_short() + (weak_type ? ", weak_type=True)" : ")");
}

}  // namespace meshsim
