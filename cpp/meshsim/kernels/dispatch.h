// Dtype dispatch restricted to the types an op accepts, so each kernel is
// instantiated only where it means something (keeps builds small).
#pragma once
#include "meshsim/core/dtype.h"
#include "meshsim/core/error.h"

namespace meshsim {

// A 16-byte element (complex128) moved as one opaque word.
struct Word16 {
  uint64_t lo, hi;
};

// Calls f(W{}) with W an opaque word of `size` bytes (1, 2, 4, 8 or 16): kernels
// that only move elements need no per-dtype instantiations.
template <class F>
decltype(auto) dispatch_word(size_t size, F&& f) {
  switch (size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return f(Word16{});
  }
}

// The dtype sets kernels accept, each one predicate over core/dtype.h's
// single dtype switch (dispatch_admitted) plus the TypeError for the rest.
struct WideFloatDTypes {  // float32, float64: kernels that call BLAS or xsimd
  static constexpr bool admits(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }
  [[noreturn]] static void reject(DType dt) {
    fail<TypeError>("expected a float32 or float64 dtype, got ", dtype_name(dt));
  }
};
struct FloatDTypes {
  static constexpr bool admits(DType dt) { return is_floating(dt); }
  [[noreturn]] static void reject(DType dt) {
    fail<TypeError>("expected a floating-point dtype, got ", dtype_name(dt));
  }
};
struct ComplexDTypes {
  static constexpr bool admits(DType dt) { return is_complex(dt); }
  [[noreturn]] static void reject(DType dt) { fail<TypeError>("expected a complex dtype, got ", dtype_name(dt)); }
};
struct IntegerDTypes {  // 8- to 64-bit integers (four-bit ones are computed in int8)
  static constexpr bool admits(DType dt) { return is_integer(dt) && !is_int4(dt); }
  [[noreturn]] static void reject(DType dt) {
    fail<TypeError>("expected an integer dtype, got ", dtype_name(dt));
  }
};
// The union of two sets; a rejected dtype gets `Else`'s error (the set the
// caller most likely meant).
template <class A, class Else>
struct EitherDTypes {
  static constexpr bool admits(DType dt) { return A::admits(dt) || Else::admits(dt); }
  [[noreturn]] static void reject(DType dt) { Else::reject(dt); }
};
struct BoolDType {  // only ever joined to another set, which names the error
  static constexpr bool admits(DType dt) { return dt == DType::Bool; }
};
// Narrow floats are rejected as floats (float32 or float64 expected), other
// types as integers.
struct WideNumericDTypes {
  static constexpr bool admits(DType dt) { return WideFloatDTypes::admits(dt) || IntegerDTypes::admits(dt); }
  [[noreturn]] static void reject(DType dt) {
    if (is_floating(dt)) WideFloatDTypes::reject(dt);
    IntegerDTypes::reject(dt);
  }
};
using NumericDTypes = EitherDTypes<FloatDTypes, IntegerDTypes>;

// float32 and float64 only: for kernels that call BLAS or xsimd on the elements.
template <class F>
decltype(auto) dispatch_wide_float(DType dt, F&& f) {
  return dispatch_admitted<WideFloatDTypes>(dt, std::forward<F>(f));
}

// Every floating-point dtype; narrow ones pass their storage type (bfloat16,
// float16, float8_*), which the kernel computes with as compute_type_t.
template <class F>
decltype(auto) dispatch_float(DType dt, F&& f) {
  return dispatch_admitted<FloatDTypes>(dt, std::forward<F>(f));
}

// complex64 and complex128.
template <class F>
decltype(auto) dispatch_complex(DType dt, F&& f) {
  return dispatch_admitted<ComplexDTypes>(dt, std::forward<F>(f));
}

// Every floating-point and complex dtype.
template <class F>
decltype(auto) dispatch_inexact(DType dt, F&& f) {
  return dispatch_admitted<EitherDTypes<ComplexDTypes, FloatDTypes>>(dt, std::forward<F>(f));
}

// float32, float64, complex64 and complex128: for kernels that call BLAS.
template <class F>
decltype(auto) dispatch_wide_inexact(DType dt, F&& f) {
  return dispatch_admitted<EitherDTypes<ComplexDTypes, WideFloatDTypes>>(dt, std::forward<F>(f));
}

template <class F>
decltype(auto) dispatch_integer(DType dt, F&& f) {
  return dispatch_admitted<IntegerDTypes>(dt, std::forward<F>(f));
}

// Integers and floats (no bool).
template <class F>
decltype(auto) dispatch_numeric(DType dt, F&& f) {
  return dispatch_admitted<NumericDTypes>(dt, std::forward<F>(f));
}

// Integers, float32 and float64: for kernels that run narrow floats in float32.
template <class F>
decltype(auto) dispatch_wide_numeric(DType dt, F&& f) {
  return dispatch_admitted<WideNumericDTypes>(dt, std::forward<F>(f));
}

// Integers, floats and complex numbers (no bool).
template <class F>
decltype(auto) dispatch_number(DType dt, F&& f) {
  return dispatch_admitted<EitherDTypes<ComplexDTypes, NumericDTypes>>(dt, std::forward<F>(f));
}

// Bool and integers (bitwise ops).
template <class F>
decltype(auto) dispatch_bitwise(DType dt, F&& f) {
  return dispatch_admitted<EitherDTypes<BoolDType, IntegerDTypes>>(dt, std::forward<F>(f));
}

}  // namespace meshsim
