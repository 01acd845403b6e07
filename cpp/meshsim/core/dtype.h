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

inline bool is_bool(DType dt) { return dt == DType::Bool; }
inline bool is_int4(DType dt) { return dt == DType::Int4 || dt == DType::UInt4; }
inline bool is_signed_int(DType dt) { return (dt >= DType::Int8 && dt <= DType::Int64) || dt == DType::Int4; }
inline bool is_unsigned_int(DType dt) { return (dt >= DType::UInt8 && dt <= DType::UInt64) || dt == DType::UInt4; }
inline bool is_integer(DType dt) { return is_signed_int(dt) || is_unsigned_int(dt); }
inline bool is_narrow_float(DType dt) { return dt >= DType::BFloat16 && dt <= DType::Float8E4M3B11FNUZ; }
inline bool is_float8(DType dt) { return dt >= DType::Float8E4M3FN && dt <= DType::Float8E4M3B11FNUZ; }
inline bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64 || is_narrow_float(dt); }
inline bool is_complex(DType dt) { return dt == DType::Complex64 || dt == DType::Complex128; }
inline bool is_inexact(DType dt) { return is_floating(dt) || is_complex(dt); }
// The real type of a complex type's parts (float32 for complex64); other types map to themselves.
inline DType real_dtype(DType dt) {
  return dt == DType::Complex64 ? DType::Float32 : dt == DType::Complex128 ? DType::Float64 : dt;
}
// The complex type with parts of a real type (complex64 for float32 and narrower floats).
inline DType complex_dtype(DType dt) {
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

// Calls f(T{}) with T the C++ element type of dt, for every real dtype
// (complex and four-bit integers raise: see dispatch_any_dtype).
template <class F>
decltype(auto) dispatch_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::Bool: return f(bool{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::UInt32: return f(uint32_t{});
    case DType::UInt64: return f(uint64_t{});
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
    default: fail_unsupported_dtype(dt, "a real dtype");
  }
}

// Every dtype, complex and four-bit integers included: for kernels that move
// or convert elements (convert_element_type, literals, gathers).
template <class F>
decltype(auto) dispatch_any_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::Complex64: return f(complex64{});
    case DType::Complex128: return f(complex128{});
    case DType::Int4: return f(int4{});
    case DType::UInt4: return f(uint4{});
    default: return dispatch_dtype(dt, std::forward<F>(f));
  }
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::UInt16; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::UInt32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::UInt64; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float16>() { return DType::Float16; }
template <> constexpr DType dtype_of<float8_e4m3fn>() { return DType::Float8E4M3FN; }
template <> constexpr DType dtype_of<float8_e5m2>() { return DType::Float8E5M2; }
template <> constexpr DType dtype_of<float8_e4m3>() { return DType::Float8E4M3; }
template <> constexpr DType dtype_of<float8_e3m4>() { return DType::Float8E3M4; }
template <> constexpr DType dtype_of<float8_e4m3fnuz>() { return DType::Float8E4M3FNUZ; }
template <> constexpr DType dtype_of<float8_e5m2fnuz>() { return DType::Float8E5M2FNUZ; }
template <> constexpr DType dtype_of<float8_e4m3b11fnuz>() { return DType::Float8E4M3B11FNUZ; }
template <> constexpr DType dtype_of<complex64>() { return DType::Complex64; }
template <> constexpr DType dtype_of<complex128>() { return DType::Complex128; }
template <> constexpr DType dtype_of<int4>() { return DType::Int4; }
template <> constexpr DType dtype_of<uint4>() { return DType::UInt4; }

}  // namespace meshsim
