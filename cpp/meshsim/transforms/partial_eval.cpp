#include "meshsim/ir/program_consts.h"
#include "meshsim/transforms/partial_eval.h"

#include <optional>

#include "meshsim/ir/trace.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

// Binds the equations of `p` for which `which[k]` holds, in order, over an
// environment holding (at least) their inputs.
void bind_equations(const Program& p, const std::vector<bool>& which, std::vector<std::optional<Value>>& env) {
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    if (!which[k]) continue;
    const Equation& e = p.eqns[k];
    Values in;
    for (int v : e.inputs) in.push_back(*env[v]);
    const Values out = meshsim::bind(*e.prim, in, e.params);
    for (size_t i = 0; i < e.outputs.size(); ++i) env[e.outputs[i]] = out[i];
  }
}

// The program's constants as values (so a traced program captures them again).
std::vector<std::optional<Value>> constant_env(const Program& p) {
  std::vector<std::optional<Value>> env(p.avals.size());
  for (size_t i = 0; i < p.constvars.size(); ++i)
    env[p.constvars[i]] = Value(const_array(p, i));
  return env;
}

}  // namespace

PartialEvalPrograms partial_eval(const Program& p, const std::vector<bool>& known_in,
                                 const std::vector<bool>& instantiate) {
  if (known_in.size() != p.invars.size() || instantiate.size() != p.outvars.size())
    fail<ValueError>("partial_eval: expected ", p.invars.size(), " input and ", p.outvars.size(),
                     " output flags, got ", known_in.size(), " and ", instantiate.size());
  std::vector<bool> known(p.avals.size(), false), is_const(p.avals.size(), false);
  for (int v : p.constvars) known[v] = is_const[v] = true;
  for (size_t i = 0; i < p.invars.size(); ++i) known[p.invars[i]] = known_in[i];
  std::vector<bool> known_eqn(p.eqns.size(), false), staged_eqn(p.eqns.size(), false);
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    const Equation& e = p.eqns[k];
    bool all = !e.outputs.empty();  // an equation for its effects runs where it stood
    for (int v : e.inputs) all = all && known[v];
    known_eqn[k] = all;
    staged_eqn[k] = !all;
    for (int v : e.outputs) known[v] = all;
  }

  // Residuals: the known values (constants aside: the staged program holds
  // those itself) the staged equations read or the staged outputs are.
  PartialEvalPrograms r;
  std::vector<bool> residual(p.avals.size(), false);
  for (size_t k = 0; k < p.eqns.size(); ++k)
    if (staged_eqn[k])
      for (int v : p.eqns[k].inputs)
        if (known[v] && !is_const[v]) residual[v] = true;
  for (size_t j = 0; j < p.outvars.size(); ++j) {
    const int v = p.outvars[j];
    r.out_known.push_back(known[v] && !instantiate[j]);
    if (known[v] && instantiate[j] && !is_const[v]) residual[v] = true;
  }
  std::vector<int> residuals;
  for (size_t v = 0; v < residual.size(); ++v)
    if (residual[v]) residuals.push_back(static_cast<int>(v));
  r.num_residuals = static_cast<int>(residuals.size());

  Avals known_avals, staged_avals;
  for (int v : residuals) staged_avals.push_back(p.avals[v]);
  for (size_t i = 0; i < p.invars.size(); ++i)
    (known_in[i] ? known_avals : staged_avals).push_back(p.avals[p.invars[i]]);

  r.known = trace_program(known_avals, [&](const Values& args) {
    auto env = constant_env(p);
    size_t a = 0;
    for (size_t i = 0; i < p.invars.size(); ++i)
      if (known_in[i]) env[p.invars[i]] = args[a++];
    bind_equations(p, known_eqn, env);
    Values out;
    for (size_t j = 0; j < p.outvars.size(); ++j)
      if (r.out_known[j]) out.push_back(*env[p.outvars[j]]);
    for (int v : residuals) out.push_back(*env[v]);
    return out;
  });
  r.staged = trace_program(staged_avals, [&](const Values& args) {
    auto env = constant_env(p);
    size_t a = 0;
    for (int v : residuals) env[v] = args[a++];
    for (size_t i = 0; i < p.invars.size(); ++i)
      if (!known_in[i]) env[p.invars[i]] = args[a++];
    bind_equations(p, staged_eqn, env);
    Values out;
    for (size_t j = 0; j < p.outvars.size(); ++j)
      if (!r.out_known[j]) out.push_back(*env[p.outvars[j]]);
    return out;
  });
  dce(*r.known);
  return r;
}

}  // namespace meshsim
