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

// float32 and float64 only: for kernels that call BLAS or xsimd on the elements.
template <class F>
decltype(auto) dispatch_wide_float(DType dt, F&& f) {
  if (dt == DType::Float64) return f(double{});
  if (dt == DType::Float32) return f(float{});
  fail<TypeError>("expected a float32 or float64 dtype, got ", dtype_name(dt));
}

// Every floating-point dtype; narrow ones pass their storage type (bfloat16,
// float16, float8_*), which the kernel computes with as compute_type_t.
template <class F>
decltype(auto) dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::BFloat16: return f(bfloat16{});
    case DType::Float16: return f(float16{});
    case DType::Float8E4M3FN: return f(float8_e4m3fn{});
    case DType::Float8E5M2: return f(float8_e5m2{});
    case DType::Float8E4M3: return f(float8_e4m3{});
    case DType::Float8E3M4: return f(float8_e3m4{});
    case DType::Float8E4M3FNUZ: return f(float8_e4m3fnuz{});
    case DType::Float8E5M2FNUZ: return f(float8_e5m2fnuz{});
    case DType::Float8E4M3B11FNUZ: return f(float8_e4m3b11fnuz{});
    default: fail<TypeError>("expected a floating-point dtype, got ", dtype_name(dt));
  }
}

// complex64 and complex128.
template <class F>
decltype(auto) dispatch_complex(DType dt, F&& f) {
  if (dt == DType::Complex128) return f(complex128{});
  if (dt == DType::Complex64) return f(complex64{});
  fail<TypeError>("expected a complex dtype, got ", dtype_name(dt));
}

// Every floating-point and complex dtype.
template <class F>
decltype(auto) dispatch_inexact(DType dt, F&& f) {
  if (is_complex(dt)) return dispatch_complex(dt, std::forward<F>(f));
  return dispatch_float(dt, std::forward<F>(f));
}

// float32, float64, complex64 and complex128: for kernels that call BLAS.
template <class F>
decltype(auto) dispatch_wide_inexact(DType dt, F&& f) {
  if (is_complex(dt)) return dispatch_complex(dt, std::forward<F>(f));
  return dispatch_wide_float(dt, std::forward<F>(f));
}

template <class F>
decltype(auto) dispatch_integer(DType dt, F&& f) {
  switch (dt) {
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::UInt32: return f(uint32_t{});
    case DType::UInt64: return f(uint64_t{});
    default: fail<TypeError>("expected an integer dtype, got ", dtype_name(dt));
  }
}

// Integers and floats (no bool).
template <class F>
decltype(auto) dispatch_numeric(DType dt, F&& f) {
  if (is_floating(dt)) return dispatch_float(dt, std::forward<F>(f));
  return dispatch_integer(dt, std::forward<F>(f));
}

// Integers, float32 and float64: for kernels that run narrow floats in float32.
template <class F>
decltype(auto) dispatch_wide_numeric(DType dt, F&& f) {
  if (is_floating(dt)) return dispatch_wide_float(dt, std::forward<F>(f));
  return dispatch_integer(dt, std::forward<F>(f));
}

// Integers, floats and complex numbers (no bool).
template <class F>
decltype(auto) dispatch_number(DType dt, F&& f) {
  if (is_complex(dt)) return dispatch_complex(dt, std::forward<F>(f));
  return dispatch_numeric(dt, std::forward<F>(f));
}

// Bool and integers (bitwise ops).
template <class F>
decltype(auto) dispatch_bitwise(DType dt, F&& f) {
  if (dt == DType::Bool) return f(bool{});
  return dispatch_integer(dt, std::forward<F>(f));
}

}  // namespace meshsim
