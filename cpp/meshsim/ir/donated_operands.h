// Operands an executor gives up to the kernel it calls: those the running
// equation reads for the last time. A kernel whose result is an operand with
// a few elements changed (scatter, dynamic_update_slice) may then write into
// that operand's buffer instead of copying it whole, as XLA updates a buffer
// in place inside a loop. The executors declare the donation for the duration
// of one kernel call (a scoped, per-thread note naming the operand list it
// applies to, so a kernel's own nested calls on other operand lists see no
// donation).
#pragma once
#include <utility>
#include <vector>

#include "meshsim/ir/primitive.h"

namespace meshsim {

namespace donation_detail {
struct Note {
  const Tensors* operands = nullptr;
  const std::vector<char>* last_read = nullptr;  // per operand
};
inline Note& current() {
  thread_local Note note;
  return note;
}
}  // namespace donation_detail

// While alive: operand i of `operands` is donated where `last_read[i]` is set.
class DonatedOperands {
 public:
  DonatedOperands(const Tensors& operands, const std::vector<char>& last_read)
      : saved_(donation_detail::current()) {
    donation_detail::current() = {&operands, &last_read};
  }
  ~DonatedOperands() { donation_detail::current() = saved_; }
  DonatedOperands(const DonatedOperands&) = delete;
  DonatedOperands& operator=(const DonatedOperands&) = delete;

 private:
  donation_detail::Note saved_;
};

// Whether the caller will not read `in[i]` again (the kernel may move it out).
inline bool donated(const Tensors& in, size_t i) {
  const donation_detail::Note& n = donation_detail::current();
  return n.operands == &in && i < n.last_read->size() && (*n.last_read)[i];
}

// `in[i]`'s buffer as a result to update in place when nothing else can see
// it: donated, the only view of memory meshsim allocated, and contiguous;
// otherwise a contiguous copy. Either way the result is the kernel's to write.
inline Tensor updatable_copy(const Tensors& in, size_t i) {
  const Tensor& x = in[i];
  if (donated(in, i) && x.defined() && x.storage().use_count() == 1 && x.storage()->ours &&
      x.is_contiguous())
    return std::move(const_cast<Tensor&>(x));
  return x.copy();
}

// Operands a kernel hands on by value (to a sub-program): copies, except
// donated ones, which are moved (so that their last reads inside can donate
// them further).
inline Tensors operands_passed_on(const Tensors& in) {
  Tensors out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back(donated(in, i) ? std::move(const_cast<Tensor&>(in[i])) : in[i]);
  return out;
}

}  // namespace meshsim
