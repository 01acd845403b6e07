// Params: a primitive's static parameters (axes, dtypes, sub-programs, ...),
// ordered as they print in a jaxpr.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "meshsim/core/dtype.h"
#include "meshsim/core/error.h"
#include "meshsim/core/mesh.h"

namespace meshsim {

struct Program;
using IntList = std::vector<int64_t>;
using IntLists = std::vector<IntList>;
using StrList = std::vector<std::string>;
using ProgramPtr = std::shared_ptr<Program>;
using ProgramList = std::vector<ProgramPtr>;  // cond's branches
// Partition specs, one per operand: per dimension, the mesh axes it is split over.
using SpecList = std::vector<std::vector<StrList>>;

using ParamValue = std::variant<std::monostate, bool, int64_t, double, std::string, DType, IntList,
                                IntLists, StrList, std::vector<StrList>, SpecList, ProgramPtr,
                                ProgramList, MeshPtr>;

class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string, ParamValue>> items) : items_(items) {}

  bool has(const std::string& name) const { return find(name) != nullptr; }
  void set(const std::string& name, ParamValue v);

  template <class T>
  const T& get(const std::string& name) const {
    const ParamValue* v = find(name);
    if (!v) fail<ValueError>("missing parameter '", name, "'");
    if (auto* p = std::get_if<T>(v)) return *p;
    fail<TypeError>("parameter '", name, "' has the wrong type");
  }
  template <class T>
  T get_or(const std::string& name, T fallback) const {
    const ParamValue* v = find(name);
    if (!v || std::holds_alternative<std::monostate>(*v)) return fallback;
    return get<T>(name);
  }
  bool is_none(const std::string& name) const {
    const ParamValue* v = find(name);
    return !v || std::holds_alternative<std::monostate>(*v);
  }

  const std::vector<std::pair<std::string, ParamValue>>& items() const { return items_; }
  std::string str() const;  // "axes=(0, 1) keepdims=False"

 private:
  const ParamValue* find(const std::string& name) const {
    for (const auto& [k, v] : items_) if (k == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string, ParamValue>> items_;
};

std::string param_value_str(const ParamValue& v);

}  // namespace meshsim
