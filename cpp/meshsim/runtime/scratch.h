// Per-thread scratch space for the executors: the variables of a program (or
// of a run of equations) one thread is running, kept with their capacity
// between calls. A sub-program called once per loop iteration, branch or
// device would otherwise allocate and clear its variables (and the operand
// list it hands to kernels) on every call; large allocations also make the
// C allocator consolidate its free lists, which costs more than the call.
#pragma once
#include <memory>
#include <vector>

#include "meshsim/core/tensor.h"

namespace meshsim {

// One frame per nesting depth (a run's kernel may run a sub-program on the
// same thread, and a thread waiting inside a kernel may run another device's
// task): frames are taken and given back in stack order.
class ScratchFrame {
 public:
  // `num_values` slots, all empty.
  explicit ScratchFrame(size_t num_values) : frame_(acquire()) { frame_.values.resize(num_values); }
  ~ScratchFrame() {
    // Values outliving the call were moved or copied out; only what a failed
    // call left behind is still held.
    for (Tensor& t : frame_.values)
      if (t.defined()) t = Tensor();
    frame_.operands.clear();
    --depth();
  }
  ScratchFrame(const ScratchFrame&) = delete;
  ScratchFrame& operator=(const ScratchFrame&) = delete;

  std::vector<Tensor>& values() { return frame_.values; }
  Tensors& operands() { return frame_.operands; }  // an equation's operands, refilled per equation

 private:
  struct Frame {
    std::vector<Tensor> values;
    Tensors operands;
  };
  static size_t& depth() {
    thread_local size_t d = 0;
    return d;
  }
  static Frame& acquire() {
    thread_local std::vector<std::unique_ptr<Frame>> frames;
    if (frames.size() <= depth()) frames.push_back(std::make_unique<Frame>());
    return *frames[depth()++];
  }
  Frame& frame_;
};

}  // namespace meshsim
