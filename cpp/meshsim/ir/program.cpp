#include "meshsim/ir/program.h"

#include <sstream>

namespace meshsim {

Avals Program::in_avals() const {
  Avals a;
  for (int v : invars) a.push_back(avals[v]);
  return a;
}

Avals Program::out_avals() const {
  Avals a;
  for (int v : outvars) a.push_back(avals[v]);
  return a;
}

namespace {

// Variable names as jaxprs print them: a..z, ba..bz, ...
std::string var_name(int id) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + id % 26));
    id /= 26;
  } while (id > 0);
  return s;
}

}  // namespace

std::string Program::str() const {
  // Number variables in order of appearance, like JAX.
  std::vector<int> order(avals.size(), -1);
  int next = 0;
  auto name = [&](int v) {
    if (order[v] < 0) order[v] = next++;
    return var_name(order[v]);
  };
  auto decl = [&](int v) { return name(v) + ":" + avals[v].str_short(/*short_dtype=*/true); };
  std::ostringstream os;
  os << "{ lambda ";
  for (size_t i = 0; i < constvars.size(); ++i) os << (i ? " " : "") << decl(constvars[i]);
  os << "; ";
  for (size_t i = 0; i < invars.size(); ++i) os << (i ? " " : "") << decl(invars[i]);
  os << ". let\n";
  for (const Equation& e : eqns) {
    os << "    ";
    for (size_t i = 0; i < e.outputs.size(); ++i) os << (i ? " " : "") << decl(e.outputs[i]);
    os << " = " << e.prim->name;
    if (!e.params.items().empty()) os << "[" << e.params.str() << "]";
    for (int v : e.inputs) os << " " << name(v);
    os << "\n";
  }
  os << "  in (";
  for (size_t i = 0; i < outvars.size(); ++i) os << (i ? ", " : "") << name(outvars[i]);
  os << (outvars.size() == 1 ? ",) }" : ") }");
  return os.str();
}

}  // namespace meshsim
