// Cancellation of running programs: a program interrupted (Ctrl-C while its
// results are awaited) stops at the next check point instead of running on.
//
// Each dispatched program has a token; the thread running it (and every
// worker thread computing for it, see CancelScope) sees it as the current
// token. Check points (before every kernel, and in the outer loops of long
// kernels) raise Cancelled once the token is set, so the program unwinds like
// any other error: its results hold the error, later programs are unaffected.
#pragma once
#include <atomic>
#include <memory>
#include <stdexcept>

namespace meshsim {

struct CancelToken {
  std::atomic<bool> cancelled{false};
};
using CancelTokenPtr = std::shared_ptr<CancelToken>;

// Raised at a check point of a cancelled program (a RuntimeError in Python).
struct Cancelled : std::runtime_error {
  Cancelled();
};

// Makes `token` the current thread's token while in scope (null: none).
class CancelScope {
 public:
  explicit CancelScope(CancelToken* token);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  CancelToken* saved_;
};

CancelToken* current_cancel_token();

// Raises Cancelled if the current program was cancelled. Cheap (one
// thread-local read and one relaxed atomic load): call it per outer iteration.
inline void check_cancelled() {
  CancelToken* t = current_cancel_token();
  if (t && t->cancelled.load(std::memory_order_relaxed)) throw Cancelled();
}

}  // namespace meshsim
