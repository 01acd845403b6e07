#include "meshsim/runtime/scalar_runs.h"

#include <map>

#include "meshsim/core/cancel.h"

namespace meshsim {

namespace {

bool register_dtype(const Aval& a) {
  return a.shape.empty() && (a.dtype == DType::Int32 || a.dtype == DType::Bool);
}

// A primitive that only moves elements (squeeze, reshape) from a one-element
// operand to a 0-d int32 or bool result: the result is that element, read
// into a register like a 0-d operand.
bool moves_single_element(const Program& program, const Equation& e) {
  if (!e.prim->moves_elements || e.inputs.size() != 1 || e.outputs.size() != 1) return false;
  const Aval& in = program.avals[e.inputs[0]];
  const Aval& out = program.avals[e.outputs[0]];
  return register_dtype(out) && in.dtype == out.dtype && num_elements(in.shape) == 1;
}

// The op equation `e` computes in registers, or nullptr when it
// cannot join a run; `*pass` is set for a pass-through equation.
const IntRegisterOp* scalar_step_of(const Program& program, const Equation& e, bool* pass) {
  *pass = false;
  if (e.prim->is_collective() || e.prim->mesh_call || !sub_programs(e).empty()) return nullptr;
  if (moves_single_element(program, e)) {
    *pass = true;
    return nullptr;
  }
  for (const std::vector<int>* vars : {&e.inputs, &e.outputs})
    for (int v : *vars)
      if (!register_dtype(program.avals[v])) return nullptr;
  if (e.prim->passes_through) {
    if (e.inputs.size() != e.outputs.size() || e.inputs.empty()) return nullptr;
    for (size_t i = 0; i < e.inputs.size(); ++i)
      if (program.avals[e.inputs[i]].dtype != program.avals[e.outputs[i]].dtype) return nullptr;
    *pass = true;
    return nullptr;
  }
  const IntRegisterOp* op = e.prim->int_scalar_op.op ? &e.prim->int_scalar_op : nullptr;
  if (!op || e.outputs.size() != 1 || e.inputs.empty() ||
      (op->arity >= 0 && static_cast<size_t>(op->arity) != e.inputs.size()))
    return nullptr;
  const DType out = program.avals[e.outputs[0]].dtype;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const DType in = program.avals[e.inputs[i]].dtype;
    const bool ok = op->selection ? (i == 0 || in == out) : in == DType::Int32;
    if (!ok) return nullptr;
  }
  if (op->selection && e.inputs.size() < 2) return nullptr;
  return op;
}

// The results of the 0-d int32/bool equations whose operands are all known
// when the program is planned (literals, or results of such equations), by
// equation; empty where not known. An equation without a register op is
// computed by its own kernel, once: the conversion of a literal index
// (convert_element_type of an int32 literal) costs nothing per run then.
std::vector<std::vector<int32_t>> known_results(const Program& program,
                                                const std::vector<const IntRegisterOp*>& op,
                                                const std::vector<char>& pass) {
  std::vector<char> known(program.avals.size(), 0);
  std::vector<int32_t> value(program.avals.size(), 0);
  for (size_t i = 0; i < program.constvars.size(); ++i) {
    const int v = program.constvars[i];
    if (!register_dtype(program.avals[v])) continue;
    known[v] = 1;
    value[v] = scalar_register(program.consts[i]);
  }
  std::vector<std::vector<int32_t>> results(program.eqns.size());
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Equation& e = program.eqns[k];
    if (e.inputs.empty()) continue;
    bool all_known = true;
    for (int v : e.inputs) all_known = all_known && known[v];
    if (!all_known) continue;
    std::vector<int32_t> in;
    for (int v : e.inputs) in.push_back(value[v]);
    std::vector<int32_t>& out = results[k];
    if (pass[k]) {
      out = in;
    } else if (op[k]) {
      out = {op[k]->op(in.data(), static_cast<int>(in.size()))};
    } else {
      const Primitive& prim = *e.prim;
      bool foldable = prim.kind == Kind::Local && prim.kernel && !prim.has_effects && !prim.passes_through;
      for (int v : e.outputs) foldable = foldable && register_dtype(program.avals[v]);
      if (!foldable) continue;
      Tensors operands;
      Avals out_avals;
      for (int v : e.inputs) operands.push_back(scalar_tensor(value[v], program.avals[v].dtype));
      for (int v : e.outputs) out_avals.push_back(program.avals[v]);
      Tensors res;
      try {
        res = prim.kernel(operands, e.params, out_avals);
      } catch (const std::exception&) {
        continue;  // left to fail, if ever, where it runs
      }
      if (res.size() != e.outputs.size()) continue;
      for (size_t i = 0; i < res.size(); ++i) {
        if (res[i].dtype() != out_avals[i].dtype || !res[i].shape().empty()) {
          out.clear();
          break;
        }
        out.push_back(scalar_register(res[i]));
      }
      if (out.empty()) continue;
    }
    for (size_t i = 0; i < e.outputs.size(); ++i) {
      known[e.outputs[i]] = 1;
      value[e.outputs[i]] = out[i];
    }
  }
  return results;
}

}  // namespace

Tensor scalar_tensor(int32_t value, DType dtype) {
  return dtype == DType::Bool ? Tensor::scalar<bool>(value != 0) : Tensor::scalar<int32_t>(value);
}

void compute_scalar_steps(const ScalarRun& r, int32_t* registers) {
  thread_local std::vector<int32_t> operands;
  for (const ScalarRun::Step& s : r.steps) {
    operands.resize(s.arity);
    for (int i = 0; i < s.arity; ++i) operands[i] = registers[r.operand_registers[s.first_operand + i]];
    registers[s.result] = s.op ? s.op->op(operands.data(), s.arity) : operands[0];
  }
}

ScalarPlan::ScalarPlan(const Program& program, const std::vector<int>& last) {
  const size_t n = program.eqns.size();
  role_.assign(n, -1);
  std::vector<const IntRegisterOp*> op(n);
  std::vector<char> eligible(n), pass(n);
  for (size_t k = 0; k < n; ++k) {
    bool p = false;
    op[k] = scalar_step_of(program, program.eqns[k], &p);
    pass[k] = p;
  }
  // An equation with neither a register op nor a pass-through joins a run
  // only as a result known when planned.
  const std::vector<std::vector<int32_t>> known_result = known_results(program, op, pass);
  for (size_t k = 0; k < n; ++k) eligible[k] = op[k] || pass[k] || !known_result[k].empty();
  std::vector<int> literal(program.avals.size(), -1);  // per constant variable: its index in consts
  for (size_t i = 0; i < program.constvars.size(); ++i)
    if (register_dtype(program.avals[program.constvars[i]])) literal[program.constvars[i]] = static_cast<int>(i);

  for (size_t k = 0; k < n;) {
    if (!eligible[k]) {
      ++k;
      continue;
    }
    size_t end = k;
    bool computes = false;
    for (; end < n && eligible[end]; ++end) computes = computes || !program.eqns[end].prim->passes_through;
    if (!computes) {  // pass-throughs alone (no kernels): nothing to save
      k = end;
      continue;
    }
    ScalarRun r;
    r.first = k;
    r.last = end - 1;
    std::map<int, int> reg;  // variable -> register
    std::vector<char> known;  // per register: value known when planned
    // Registers: the run's non-literal inputs first, then literals and results.
    for (size_t j = k; j < end; ++j) {
      if (!op[j] && !pass[j]) continue;  // known when planned: reads nothing
      for (int v : program.eqns[j].inputs)
        if (!reg.count(v) && literal[v] < 0) {
          bool produced_here = false;
          for (size_t i = k; i < j && !produced_here; ++i)
            for (int o : program.eqns[i].outputs) produced_here = produced_here || o == v;
          if (produced_here) continue;
          reg[v] = static_cast<int>(r.inputs.size());
          r.inputs.push_back(v);
        }
    }
    r.initial.assign(r.inputs.size(), 0);
    known.assign(r.inputs.size(), 0);
    auto new_register = [&](int v, bool is_known, int32_t value) {
      reg[v] = static_cast<int>(r.initial.size());
      r.initial.push_back(value);
      known.push_back(is_known);
      return reg[v];
    };
    for (size_t j = k; j < end; ++j) {
      const Equation& e = program.eqns[j];
      if (!op[j] && !pass[j]) {  // computed by its kernel when planned
        r.computed.push_back(false);
        for (size_t i = 0; i < e.outputs.size(); ++i) new_register(e.outputs[i], true, known_result[j][i]);
        continue;
      }
      std::vector<int> operands;
      bool all_known = true;
      for (int v : e.inputs) {
        if (!reg.count(v)) new_register(v, true, scalar_register(program.consts[literal[v]]));
        operands.push_back(reg.at(v));
        all_known = all_known && known[reg.at(v)];
      }
      r.computed.push_back(!all_known);
      if (pass[j]) {
        // Each result is its operand's register.
        for (size_t i = 0; i < e.outputs.size(); ++i) {
          const int s = operands[i];
          const int out = new_register(e.outputs[i], known[s], r.initial[s]);
          if (!all_known) {
            r.steps.push_back({nullptr, out, static_cast<int>(r.operand_registers.size()), 1});
            r.operand_registers.push_back(s);
          }
        }
        continue;
      }
      std::vector<int32_t> values;
      for (int s : operands) values.push_back(r.initial[s]);
      const int32_t folded = all_known ? op[j]->op(values.data(), static_cast<int>(values.size())) : 0;
      const int out = new_register(e.outputs[0], all_known, folded);
      if (!all_known) {
        r.steps.push_back({op[j], out, static_cast<int>(r.operand_registers.size()),
                           static_cast<int>(operands.size())});
        r.operand_registers.insert(r.operand_registers.end(), operands.begin(), operands.end());
      }
    }
    for (size_t j = k; j < end; ++j)
      for (int v : program.eqns[j].outputs)
        if (last[v] > static_cast<int>(r.last)) {
          const int s = reg.at(v);
          const DType dtype = program.avals[v].dtype;
          r.kept.push_back({v, s, dtype, known[s] ? scalar_tensor(r.initial[s], dtype) : Tensor()});
        }
    const int index = static_cast<int>(runs_.size());
    for (size_t j = k; j < end; ++j) role_[j] = index;
    runs_.push_back(std::move(r));
    k = end;
  }
}

}  // namespace meshsim
