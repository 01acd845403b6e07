// Dtype dispatch restricted to the types an op accepts, so each kernel is
// instantiated only where it means something (keeps builds small).
#pragma once
#include "meshsim/core/dtype.h"
#include "meshsim/core/error.h"

namespace meshsim {

template <class F>
decltype(auto) dispatch_float(DType dt, F&& f) {
  if (dt == DType::Float64) return f(double{});
  if (dt == DType::Float32) return f(float{});
  fail<TypeError>("expected a floating-point dtype, got ", dtype_name(dt));
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

// Bool and integers (bitwise ops).
template <class F>
decltype(auto) dispatch_bitwise(DType dt, F&& f) {
  if (dt == DType::Bool) return f(bool{});
  return dispatch_integer(dt, std::forward<F>(f));
}

}  // namespace meshsim
