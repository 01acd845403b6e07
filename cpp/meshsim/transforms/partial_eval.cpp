#include "meshsim/ir/program_consts.h"
#include "meshsim/transforms/partial_eval.h"

#include <algorithm>
#include <map>
#include <optional>

#include "meshsim/ir/trace.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

Values inputs_of(const Equation& e, const std::vector<std::optional<Value>>& env) {
  Values in;
  for (int v : e.inputs) in.push_back(*env[v]);
  return in;
}

void set_outputs(const Equation& e, const Values& out, std::vector<std::optional<Value>>& env) {
  for (size_t i = 0; i < e.outputs.size(); ++i) env[e.outputs[i]] = out[i];
}

std::map<std::string, PartialEvalRule>& partial_eval_rules() {
  static std::map<std::string, PartialEvalRule> rules;
  return rules;
}

// The split of `e` by its primitive's rule, when some but not all of its
// inputs are known.
std::optional<EquationSplit> split_of(const Program& p, const Equation& e, const std::vector<bool>& known) {
  const auto rule = partial_eval_rules().find(e.prim->name);
  if (rule == partial_eval_rules().end() || e.outputs.empty()) return std::nullopt;
  std::vector<bool> known_in;
  Avals in;
  for (int v : e.inputs) {
    known_in.push_back(known[v]);
    in.push_back(p.avals[v]);
  }
  if (std::none_of(known_in.begin(), known_in.end(), [](bool k) { return k; })) return std::nullopt;
  return rule->second(e, in, known_in);
}

// The program's constants as values (so a traced program captures them again).
std::vector<std::optional<Value>> constant_env(const Program& p) {
  std::vector<std::optional<Value>> env(p.avals.size());
  for (size_t i = 0; i < p.constvars.size(); ++i)
    env[p.constvars[i]] = Value(const_array(p, i));
  return env;
}

}  // namespace

void register_partial_eval_rule(const std::string& primitive, PartialEvalRule rule) {
  partial_eval_rules()[primitive] = std::move(rule);
}

PartialEvalRule call_partial_eval_rule(const std::string& param, bool inline_known) {
  return [param, inline_known](const Equation& e, const Avals&,
                               const std::vector<bool>& known_in) -> std::optional<EquationSplit> {
    const Program& body = *e.params.get<ProgramPtr>(param);
    const PartialEvalPrograms pe = partial_eval(body, known_in, std::vector<bool>(body.outvars.size(), false));
    if (std::none_of(pe.out_known.begin(), pe.out_known.end(), [](bool k) { return k; })) return std::nullopt;
    pe.known->name = pe.staged->name = body.name;
    EquationSplit split;
    split.out_known = pe.out_known;
    split.staged_reads.assign(known_in.size(), false);
    const Avals known_out = pe.known->out_avals();
    split.residual_avals.assign(known_out.end() - pe.num_residuals, known_out.end());
    const Primitive* prim = e.prim;
    Params known_params = e.params, staged_params = e.params;
    known_params.set(param, pe.known);
    staged_params.set(param, pe.staged);
    const ProgramPtr known = pe.known;
    split.known = [=](const Values& in) {
      return inline_known ? eval_program(*known, in) : meshsim::bind(*prim, in, known_params);
    };
    split.staged = [=](const Values& residuals, const Values& in) {
      Values operands = residuals;
      operands.insert(operands.end(), in.begin(), in.end());
      return meshsim::bind(*prim, operands, staged_params);
    };
    return split;
  };
}

PartialEvalPrograms partial_eval(const Program& p, const std::vector<bool>& known_in,
                                 const std::vector<bool>& instantiate) {
  if (known_in.size() != p.invars.size() || instantiate.size() != p.outvars.size())
    fail<ValueError>("partial_eval: expected ", p.invars.size(), " input and ", p.outvars.size(),
                     " output flags, got ", known_in.size(), " and ", instantiate.size());
  std::vector<bool> known(p.avals.size(), false), is_const(p.avals.size(), false);
  for (int v : p.constvars) known[v] = is_const[v] = true;
  for (size_t i = 0; i < p.invars.size(); ++i) known[p.invars[i]] = known_in[i];
  std::vector<bool> known_eqn(p.eqns.size(), false), staged_eqn(p.eqns.size(), false);
  std::map<size_t, EquationSplit> splits;  // by equation
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    const Equation& e = p.eqns[k];
    bool all = !e.outputs.empty();  // an equation for its effects runs where it stood
    for (int v : e.inputs) all = all && known[v];
    if (!all) {
      if (std::optional<EquationSplit> split = split_of(p, e, known)) {
        for (size_t i = 0; i < e.outputs.size(); ++i) known[e.outputs[i]] = split->out_known[i];
        splits.emplace(k, std::move(*split));
        continue;
      }
    }
    known_eqn[k] = all;
    staged_eqn[k] = !all;
    for (int v : e.outputs) known[v] = all;
  }

  // Residuals: the known values (constants aside: the staged program holds
  // those itself) the staged equations read or the staged outputs are.
  PartialEvalPrograms r;
  std::vector<bool> residual(p.avals.size(), false);
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    const auto split = splits.find(k);
    if (!staged_eqn[k] && split == splits.end()) continue;
    const std::vector<int>& in = p.eqns[k].inputs;
    for (size_t i = 0; i < in.size(); ++i)
      if (known[in[i]] && !is_const[in[i]] && (split == splits.end() || split->second.staged_reads[i]))
        residual[in[i]] = true;
  }
  for (size_t j = 0; j < p.outvars.size(); ++j) {
    const int v = p.outvars[j];
    r.out_known.push_back(known[v] && !instantiate[j]);
    if (known[v] && instantiate[j] && !is_const[v]) residual[v] = true;
  }
  std::vector<int> residuals;
  for (size_t v = 0; v < residual.size(); ++v)
    if (residual[v]) residuals.push_back(static_cast<int>(v));
  size_t num_split_residuals = 0;
  for (const auto& [k, split] : splits) num_split_residuals += split.residual_avals.size();
  r.num_residuals = static_cast<int>(residuals.size() + num_split_residuals);

  Avals known_avals, staged_avals;
  for (int v : residuals) staged_avals.push_back(p.avals[v]);
  for (const auto& [k, split] : splits)
    staged_avals.insert(staged_avals.end(), split.residual_avals.begin(), split.residual_avals.end());
  for (size_t i = 0; i < p.invars.size(); ++i)
    (known_in[i] ? known_avals : staged_avals).push_back(p.avals[p.invars[i]]);

  r.known = trace_program(known_avals, [&](const Values& args) {
    auto env = constant_env(p);
    size_t a = 0;
    for (size_t i = 0; i < p.invars.size(); ++i)
      if (known_in[i]) env[p.invars[i]] = args[a++];
    Values split_residuals;
    for (size_t k = 0; k < p.eqns.size(); ++k) {
      const Equation& e = p.eqns[k];
      SourceInfoScope source(e.source_info);
      if (known_eqn[k]) {
        set_outputs(e, meshsim::bind(*e.prim, inputs_of(e, env), e.params), env);
        continue;
      }
      const auto split = splits.find(k);
      if (split == splits.end()) continue;
      Values in;
      for (int v : e.inputs)
        if (known[v]) in.push_back(*env[v]);
      const Values out = split->second.known(in);
      size_t o = 0;
      for (size_t i = 0; i < e.outputs.size(); ++i)
        if (split->second.out_known[i]) env[e.outputs[i]] = out[o++];
      split_residuals.insert(split_residuals.end(), out.begin() + o, out.end());
    }
    Values out;
    for (size_t j = 0; j < p.outvars.size(); ++j)
      if (r.out_known[j]) out.push_back(*env[p.outvars[j]]);
    for (int v : residuals) out.push_back(*env[v]);
    out.insert(out.end(), split_residuals.begin(), split_residuals.end());
    return out;
  });
  r.staged = trace_program(staged_avals, [&](const Values& args) {
    auto env = constant_env(p);
    size_t a = 0;
    for (int v : residuals) env[v] = args[a++];
    size_t next_split_residual = a;
    a += num_split_residuals;
    for (size_t i = 0; i < p.invars.size(); ++i)
      if (!known_in[i]) env[p.invars[i]] = args[a++];
    for (size_t k = 0; k < p.eqns.size(); ++k) {
      const Equation& e = p.eqns[k];
      SourceInfoScope source(e.source_info);
      if (staged_eqn[k]) {
        set_outputs(e, meshsim::bind(*e.prim, inputs_of(e, env), e.params), env);
        continue;
      }
      const auto split = splits.find(k);
      if (split == splits.end()) continue;
      const EquationSplit& sp = split->second;
      const Values res(args.begin() + next_split_residual,
                       args.begin() + next_split_residual + sp.residual_avals.size());
      next_split_residual += sp.residual_avals.size();
      Values in;
      for (size_t i = 0; i < e.inputs.size(); ++i)
        if (!known[e.inputs[i]] || sp.staged_reads[i]) in.push_back(*env[e.inputs[i]]);
      const Values out = sp.staged(res, in);
      size_t o = 0;
      for (size_t i = 0; i < e.outputs.size(); ++i)
        if (!sp.out_known[i]) env[e.outputs[i]] = out[o++];
    }
    Values out;
    for (size_t j = 0; j < p.outvars.size(); ++j)
      if (!r.out_known[j]) out.push_back(*env[p.outvars[j]]);
    return out;
  });
  dce(*r.known);
  return r;
}

}  // namespace meshsim
