// Element types, JAX's type-promotion lattice and x64 canonicalisation.
#pragma once
#include <cstdint>
#include <string>

#include <utility>

#include "meshsim/core/float_types.h"
#include "meshsim/core/element_types.h"

namespace meshsim {

enum class DType : uint8_t {
  Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64,
  // Narrow floats, stored as their bits and computed in float32.
  BFloat16, Float16, Float8E4M3FN, Float8E5M2, Float8E4M3, Float8E3M4, Float8E4M3FNUZ,
  Float8E5M2FNUZ, Float8E4M3B11FNUZ,
  // Complex numbers: pairs of float32 / float64 (real, imaginary), as NumPy stores them.
  Complex64, Complex128,
  // Four-bit integers, one per byte as ml_dtypes stores them; computed in int8.
  Int4, UInt4,
};
constexpr int kNumDTypes = 24;

size_t itemsize(DType dt);
const char* dtype_name(DType dt);        // "float32"
const char* dtype_short_name(DType dt);  // "f32", as jaxprs print it
DType dtype_from_name(const std::string& name);

constexpr bool is_bool(DType dt) { return dt == DType::Bool; }
constexpr bool is_int4(DType dt) { return dt == DType::Int4 || dt == DType::UInt4; }
constexpr bool is_signed_int(DType dt) { return (dt >= DType::Int8 && dt <= DType::Int64) || dt == DType::Int4; }
constexpr bool is_unsigned_int(DType dt) { return (dt >= DType::UInt8 && dt <= DType::UInt64) || dt == DType::UInt4; }
constexpr bool is_integer(DType dt) { return is_signed_int(dt) || is_unsigned_int(dt); }
constexpr bool is_narrow_float(DType dt) { return dt >= DType::BFloat16 && dt <= DType::Float8E4M3B11FNUZ; }
constexpr bool is_float8(DType dt) { return dt >= DType::Float8E4M3FN && dt <= DType::Float8E4M3B11FNUZ; }
constexpr bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64 || is_narrow_float(dt); }
constexpr bool is_complex(DType dt) { return dt == DType::Complex64 || dt == DType::Complex128; }
constexpr bool is_inexact(DType dt) { return is_floating(dt) || is_complex(dt); }
// The real type of a complex type's parts (float32 for complex64); other types map to themselves.
constexpr DType real_dtype(DType dt) {
  return dt == DType::Complex64 ? DType::Float32 : dt == DType::Complex128 ? DType::Float64 : dt;
}
// The complex type with parts of a real type (complex64 for float32 and narrower floats).
constexpr DType complex_dtype(DType dt) {
  return dt == DType::Float64 || dt == DType::Complex128 ? DType::Complex128 : DType::Complex64;
}

// A dtype plus JAX's weak-type flag (Python scalars are weakly typed).
struct TypedDType {
  DType dtype;
  bool weak = false;
  bool operator==(const TypedDType& o) const { return dtype == o.dtype && weak == o.weak; }
};

// Least upper bound on JAX's promotion lattice, weak types included, then
// canonicalised for the current x64 mode (x64 off: 64-bit types become 32-bit).
// In strict mode (jax_numpy_dtype_promotion='strict') only weak types
// promote; other mixes raise TypePromotionError.
TypedDType promote_types(TypedDType a, TypedDType b);
bool strict_promotion();
void set_strict_promotion(bool on);

// The dtype an array of `dt` actually gets (int64 -> int32 when x64 is off).
DType canonicalize_dtype(DType dt);
bool x64_enabled();
void set_x64_enabled(bool on);
DType default_int_dtype();    // int32 (int64 with x64)
DType default_float_dtype();  // float32 (float64 with x64)

[[noreturn]] void fail_unsupported_dtype(DType dt, const char* what);

// Every dtype with its C++ element type, listed once: the dispatch switch and
// dtype_of below are generated from it, so a new dtype is added here only.
#define MESHSIM_FOR_EACH_DTYPE(X)                                                            \
  X(Bool, bool) X(Int8, int8_t) X(Int16, int16_t) X(Int32, int32_t) X(Int64, int64_t)       \
  X(UInt8, uint8_t) X(UInt16, uint16_t) X(UInt32, uint32_t) X(UInt64, uint64_t)             \
  X(Float32, float) X(Float64, double) X(BFloat16, bfloat16) X(Float16, float16)            \
  X(Float8E4M3FN, float8_e4m3fn) X(Float8E5M2, float8_e5m2) X(Float8E4M3, float8_e4m3)      \
  X(Float8E3M4, float8_e3m4) X(Float8E4M3FNUZ, float8_e4m3fnuz)                            \
  X(Float8E5M2FNUZ, float8_e5m2fnuz) X(Float8E4M3B11FNUZ, float8_e4m3b11fnuz)               \
  X(Complex64, complex64) X(Complex128, complex128) X(Int4, int4) X(UInt4, uint4)

// The one switch over dtypes that every typed dispatch (here and in
// kernels/dispatch.h) is built on: calls f(T{}) with T the C++ element type
// of dt when `Admitted::admits(dt)`, otherwise `Admitted::reject(dt)` raises.
// Only admitted types instantiate f, so a kernel is compiled for the dtypes
// it accepts and no others.
template <class Admitted, class F>
decltype(auto) dispatch_admitted(DType dt, F&& f) {
  switch (dt) {
#define MESHSIM_DTYPE_CASE(D, T)                            \
  case DType::D:                                            \
    if constexpr (Admitted::admits(DType::D)) return f(T{}); \
    break;
    MESHSIM_FOR_EACH_DTYPE(MESHSIM_DTYPE_CASE)
#undef MESHSIM_DTYPE_CASE
  }
  Admitted::reject(dt);
}

// Every real dtype (complex and four-bit integers raise: see dispatch_any_dtype).
struct RealDTypes {
  static constexpr bool admits(DType dt) { return !is_complex(dt) && !is_int4(dt); }
  [[noreturn]] static void reject(DType dt) { fail_unsupported_dtype(dt, "a real dtype"); }
};
template <class F>
decltype(auto) dispatch_dtype(DType dt, F&& f) {
  return dispatch_admitted<RealDTypes>(dt, std::forward<F>(f));
}

// Every dtype, complex and four-bit integers included: for kernels that move
// or convert elements (convert_element_type, literals, gathers).
struct AnyDType {
  static constexpr bool admits(DType) { return true; }
  [[noreturn]] static void reject(DType dt) { fail_unsupported_dtype(dt, "a known dtype"); }
};
template <class F>
decltype(auto) dispatch_any_dtype(DType dt, F&& f) {
  return dispatch_admitted<AnyDType>(dt, std::forward<F>(f));
}

template <class T> constexpr DType dtype_of();
#define MESHSIM_DTYPE_OF(D, T) \
  template <> constexpr DType dtype_of<T>() { return DType::D; }
MESHSIM_FOR_EACH_DTYPE(MESHSIM_DTYPE_OF)
#undef MESHSIM_DTYPE_OF

}  // namespace meshsim
