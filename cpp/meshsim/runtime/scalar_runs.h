// Runs of scalar integer equations computed in registers. Every dynamic index
// of a traced program goes through JAX's normalisation (`lt i 0`, `add i n`,
// `select_n`), often on literals, and loops index on every iteration: a
// pipeline step runs tens of thousands of such 0-d equations, each of which,
// run alone, costs an operand list, a kernel call and a result tensor for a
// single int32. A run of consecutive 0-d int32/bool equations (those whose
// primitive declares a scalar op, and pass-through ones such as pvary)
// instead computes in int32 registers and writes a tensor only for the values
// read after the run. Equations whose operands are all literals (or results
// of such) are computed once when the run is planned, by their register op or,
// lacking one, by their kernel. Each primitive declares the op its own kernel
// applies to one int32 element (its `int_scalar_op`, ir/primitive.h), so a
// run gives the same values as its equations one by one. A primitive that
// only moves elements, from a one-element operand to a 0-d result (squeezing
// a dynamic_slice of a schedule table), reads that element into a register.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meshsim/ir/program.h"

namespace meshsim {

struct ScalarRun {
  struct Step {
    const IntRegisterOp* op;  // nullptr: a pass-through (copies its operand)
    int result;             // register
    int first_operand;      // into `operand_registers`
    int arity;
  };
  struct Kept {
    int var, reg;
    DType dtype;
    Tensor folded;  // its tensor when known when planned
  };
  size_t first, last;                   // the run's equations [first, last]
  std::vector<int> inputs;              // variables read from before it: registers [0, inputs.size())
  std::vector<int32_t> initial;         // every register; literals and folded results filled in
  std::vector<int> operand_registers;
  std::vector<Step> steps;              // the equations not folded, in order
  std::vector<char> computed;           // per equation of the run: not folded
  std::vector<Kept> kept;               // values read after the run
};

// The scalar runs of a program.
class ScalarPlan {
 public:
  ScalarPlan(const Program& program, const std::vector<int>& last);
  bool empty() const { return runs_.empty(); }
  const ScalarRun* run_of(size_t k) const { return role_[k] >= 0 ? &runs_[role_[k]] : nullptr; }

 private:
  std::vector<ScalarRun> runs_;
  std::vector<int> role_;  // per equation: index of its run, -1 for none
};

// Reads a 0-d int32 or bool tensor as int32.
inline int32_t scalar_register(const Tensor& t) {
  return t.dtype() == DType::Bool ? int32_t(*t.data<uint8_t>() != 0) : *t.data<int32_t>();
}
Tensor scalar_tensor(int32_t value, DType dtype);
void compute_scalar_steps(const ScalarRun& r, int32_t* registers);

// Computes run `r` on the slots `value(var)` of one device's values and frees
// what its equations read last (`freed`: the schedule's lists); false, having
// done nothing, when one of its operands is not there (a device that
// computes only part of the run: the caller then runs its equations one by one).
template <class Slot>
bool run_scalar_run(const ScalarRun& r, const std::vector<std::vector<int>>& freed, Slot&& value) {
  thread_local std::vector<int32_t> registers;
  registers = r.initial;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const Tensor& t = value(r.inputs[i]);
    if (!t.defined()) return false;
    registers[i] = scalar_register(t);
  }
  compute_scalar_steps(r, registers.data());
  for (const ScalarRun::Kept& k : r.kept)
    value(k.var) = k.folded.defined() ? k.folded : scalar_tensor(registers[k.reg], k.dtype);
  for (size_t j = r.first; j <= r.last; ++j)
    for (int v : freed[j]) value(v) = Tensor();
  return true;
}

}  // namespace meshsim
