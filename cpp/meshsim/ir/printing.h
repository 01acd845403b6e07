// The jaxpr printer's view of one equation (Program::str, ir/program.cpp), for
// the primitives' print rules (Primitive::print_rule): where JAX's pp rule
// prints an equation otherwise than its params as stored, the primitive's
// rule edits this view where the primitive is registered.
#pragma once
#include <string>
#include <vector>

#include "meshsim/ir/program.h"

namespace meshsim {

struct PrintedParam {
  std::string key;
  ParamValue value;  // printed as params print (programs as jaxprs), unless
  std::string text;  // set: printed as it is
};

struct PrintedEquation {
  const Program& program;
  const Equation& eqn;
  std::string name;                  // the primitive's name as JAX prints it
  std::vector<PrintedParam> params;  // printed sorted by key

  const ParamValue* find(const std::string& key) const;
  // JAX's rule does not print it.
  void hide(const std::string& key);
  // Printed as `text`, in JAX's form.
  void spell(const std::string& key, std::string text);
  // A param JAX's primitive has and ours does not store (`None` unless given).
  void add(const std::string& key, ParamValue value = {}, std::string text = "");
};

// Python's forms of the values JAX's params hold.
std::string python_float_repr(double v);   // 0.1, 1e-07, inf
std::string python_list_str(const IntList& l);  // [1, 2]
// A tuple of dims, the entries flagged in `numpy` as np.int64(d) (JAX's
// batching rules shift dims with np.add): (0, np.int64(2)).
std::string numpy_tuple_str(const IntList& d, const IntList* numpy);

}  // namespace meshsim
