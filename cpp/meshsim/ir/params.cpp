#include "meshsim/ir/params.h"

#include <sstream>

#include "meshsim/ir/program.h"

namespace meshsim {

void Params::set(const std::string& name, ParamValue v) {
  for (auto& [k, old] : items_)
    if (k == name) { old = std::move(v); return; }
  items_.emplace_back(name, std::move(v));
}

namespace {
template <class T, class F>
std::string tuple_str(const std::vector<T>& xs, F&& item) {
  std::string s = "(";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + item(xs[i]);
  return s + (xs.size() == 1 ? ",)" : ")");
}
std::string quoted(const std::string& s) { return "'" + s + "'"; }
}  // namespace

// Sub-programs print inline, as jaxprs print their nested jaxprs.
std::string param_value_str(const ParamValue& v) {
  struct Printer {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { std::ostringstream os; os << d; return os.str(); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(DType d) const { return dtype_name(d); }
    std::string operator()(const IntList& l) const {
      return tuple_str(l, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const IntLists& l) const {
      return tuple_str(l, [this](const IntList& x) { return (*this)(x); });
    }
    std::string operator()(const StrList& l) const { return tuple_str(l, quoted); }
    std::string operator()(const std::vector<StrList>& l) const {
      return tuple_str(l, [this](const StrList& x) { return (*this)(x); });
    }
    std::string operator()(const SpecList& specs) const {
      return tuple_str(specs, [](const std::vector<StrList>& spec) {
        std::string s = "P(";
        for (size_t d = 0; d < spec.size(); ++d) {
          if (d) s += ", ";
          if (spec[d].empty()) s += "None";
          else if (spec[d].size() == 1) s += quoted(spec[d][0]);
          else s += tuple_str(spec[d], quoted);
        }
        return s + (spec.size() == 1 ? ",)" : ")");
      });
    }
    std::string operator()(const ProgramPtr& p) const {
      if (!p) return "None";
      std::string s, body = p->str();
      for (char c : body) s += c == '\n' ? std::string("\n      ") : std::string(1, c);
      return s;
    }
    std::string operator()(const ProgramList& l) const {
      return tuple_str(l, [this](const ProgramPtr& p) { return (*this)(p); });
    }
    std::string operator()(const MeshPtr& m) const { return m ? m->str() : "None"; }
  };
  return std::visit(Printer{}, v);
}

std::string Params::str() const {
  std::string s;
  for (size_t i = 0; i < items_.size(); ++i)
    s += (i ? " " : "") + items_[i].first + "=" + param_value_str(items_[i].second);
  return s;
}

}  // namespace meshsim
