// How the current thread's floating-point unit treats subnormal numbers.
// XLA's CPU runtime runs compiled code with denormals flushed: subnormal
// float32/float64 operands read as zero (of their sign) and subnormal results
// are written as zero, in arithmetic, comparisons, conversions, reductions and
// BLAS calls alike, while moves, negation, abs and selects (bit operations)
// keep them. Kernels run inside a DenormalsFlushed scope, which sets the x86
// MXCSR flags that give exactly this behaviour (FTZ for results, DAZ for
// operands) on this thread and restores the previous flags when it ends, so
// no per-element work is added. Python code called back from a kernel runs
// in a DenormalsKept scope. Narrow floats compute in float32, where their own
// subnormals are normal numbers (float16, float8) or are flushed the same way
// (bfloat16).
#pragma once

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#define MESHSIM_HAS_MXCSR 1
#endif

namespace meshsim {

template <bool kFlush>
class DenormalMode {
 public:
  DenormalMode() {
#ifdef MESHSIM_HAS_MXCSR
    saved_ = _mm_getcsr();
    const unsigned wanted = kFlush ? (saved_ | kFlags) : (saved_ & ~kFlags);
    if (wanted != saved_) _mm_setcsr(wanted);
#endif
  }
  ~DenormalMode() {
#ifdef MESHSIM_HAS_MXCSR
    if (_mm_getcsr() != saved_) _mm_setcsr(saved_);
#endif
  }
  DenormalMode(const DenormalMode&) = delete;
  DenormalMode& operator=(const DenormalMode&) = delete;

 private:
#ifdef MESHSIM_HAS_MXCSR
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  static constexpr unsigned kFlags = kFlushToZero | kDenormalsAreZero;
  unsigned saved_ = 0;
#endif
};

using DenormalsFlushed = DenormalMode<true>;
using DenormalsKept = DenormalMode<false>;

// The calling thread's floating-point mode on a thread computing part of its
// work (tiles of a fused group, blocks of a product), so every part gives
// the bits the caller would.
class CallersFloatMode {
 public:
#ifdef MESHSIM_HAS_MXCSR
  explicit CallersFloatMode(unsigned callers) : saved_(_mm_getcsr()) {
    if (callers != saved_) _mm_setcsr(callers);
  }
  ~CallersFloatMode() {
    if (_mm_getcsr() != saved_) _mm_setcsr(saved_);
  }
  static unsigned current() { return _mm_getcsr(); }

 private:
  unsigned saved_;
#else
  explicit CallersFloatMode(unsigned) {}
  static unsigned current() { return 0; }
#endif
  CallersFloatMode(const CallersFloatMode&) = delete;
  CallersFloatMode& operator=(const CallersFloatMode&) = delete;
};

}  // namespace meshsim
