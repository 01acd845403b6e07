#include "meshsim/runtime/inlined_calls.h"

#include <map>
#include <numeric>

namespace meshsim {
namespace {

// Primitive name -> the param holding the called program. Filled while the
// primitives register (at import), only read afterwards.
std::map<std::string, std::string>& inlined_calls() {
  static std::map<std::string, std::string> calls;
  return calls;
}

const std::string* called_program_param(const Equation& e) {
  auto it = inlined_calls().find(e.prim->name);
  return it == inlined_calls().end() ? nullptr : &it->second;
}

bool holds_calls(const Program& program) {
  for (const Equation& e : program.eqns) {
    if (called_program_param(e)) return true;
    for (const Program* sub : sub_programs(e))
      if (holds_calls(*sub)) return true;
  }
  return false;
}

Program inline_calls(const Program& program);

ProgramPtr inlined(const ProgramPtr& program) {
  return holds_calls(*program) ? std::make_shared<Program>(inline_calls(*program)) : program;
}

// The params with their sub-programs' calls inlined.
Params with_inlined_sub_programs(const Params& params) {
  Params out = params;
  for (const auto& [key, value] : params.items()) {
    if (auto* p = std::get_if<ProgramPtr>(&value); p && *p) {
      if (holds_calls(**p)) out.set(key, inlined(*p));
    } else if (auto* l = std::get_if<ProgramList>(&value)) {
      ProgramList programs;
      for (const ProgramPtr& q : *l) programs.push_back(inlined(q));
      out.set(key, programs);
    }
  }
  return out;
}

// Appends `callee`'s equations to `eqns` of `into`, its inputs read from
// `args`; returns the variables of `into` holding its results.
std::vector<int> splice(Program& into, std::vector<Equation>& eqns, const Program& callee,
                        const std::vector<int>& args) {
  std::vector<int> var(callee.avals.size(), -1);
  for (size_t i = 0; i < callee.invars.size(); ++i) var[callee.invars[i]] = args[i];
  for (size_t i = 0; i < callee.constvars.size(); ++i) {
    const int c = into.new_var(callee.avals[callee.constvars[i]]);
    into.constvars.push_back(c);
    into.consts.push_back(callee.consts[i]);
    var[callee.constvars[i]] = c;
  }
  for (const Equation& e : callee.eqns) {
    Equation copy = e;
    for (int& v : copy.inputs) v = var[v];
    for (int& v : copy.outputs) {
      const int own = v;
      var[own] = v = into.new_var(callee.avals[own]);
    }
    eqns.push_back(std::move(copy));
  }
  std::vector<int> results;
  for (int v : callee.outvars) results.push_back(var[v]);
  return results;
}

Program inline_calls(const Program& program) {
  Program p = program;
  std::vector<Equation> eqns;
  eqns.reserve(program.eqns.size());
  // What each of the program's variables is now: a call's results are its callee's.
  std::vector<int> now(program.avals.size());
  std::iota(now.begin(), now.end(), 0);
  for (const Equation& e : program.eqns) {
    Equation copy = e;
    for (int& v : copy.inputs) v = now[v];
    if (const std::string* param = called_program_param(e)) {
      const ProgramPtr callee = inlined(e.params.get<ProgramPtr>(*param));
      const std::vector<int> results = splice(p, eqns, *callee, copy.inputs);
      for (size_t i = 0; i < e.outputs.size(); ++i) now[e.outputs[i]] = results[i];
      continue;
    }
    if (!sub_programs(e).empty()) copy.params = with_inlined_sub_programs(e.params);
    eqns.push_back(std::move(copy));
  }
  p.eqns = std::move(eqns);
  for (int& v : p.outvars) v = now[v];
  return p;
}

}  // namespace

void inline_when_compiled(const std::string& prim, const std::string& param) {
  inlined_calls()[prim] = param;
}

std::optional<Program> with_calls_inlined(const Program& program) {
  if (!holds_calls(program)) return std::nullopt;
  return inline_calls(program);
}

}  // namespace meshsim
