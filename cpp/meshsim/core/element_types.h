// Element types beside the real floats: complex numbers and the four-bit
// integers.
#pragma once
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "meshsim/core/float_types.h"

namespace meshsim {

// Complex numbers are std::complex (the layout NumPy and BLAS use: real, then
// imaginary part). Kernels never use its operators for * and /, whose
// C99 Annex G recovery of infinities XLA does not do (see complex_math.h).
using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

template <class T> struct is_complex_type : std::false_type {};
template <class F> struct is_complex_type<std::complex<F>> : std::true_type {};
template <class T> inline constexpr bool is_complex_v = is_complex_type<T>::value;

// int4 / uint4, one per byte holding the low four bits (ml_dtypes' layout:
// int4 -3 is the byte 0x0d). Converting from an integer keeps the low four
// bits (wraps, as XLA's convert does); from a float it saturates, NaN -> 0.
template <bool kSigned>
struct int4_type {
  uint8_t bits;
  static constexpr bool kIsSigned = kSigned;
  static constexpr int kMin = kSigned ? -8 : 0, kMax = kSigned ? 7 : 15;

  int4_type() = default;
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0>
  explicit int4_type(U v) {
    if constexpr (std::is_floating_point_v<U>) {
      const U clamped = v != v ? U(0) : v < U(kMin) ? U(kMin) : v > U(kMax) ? U(kMax) : v;
      bits = static_cast<uint8_t>(static_cast<int>(clamped) & 0xf);
    } else {
      bits = static_cast<uint8_t>(static_cast<uint64_t>(v) & 0xf);
    }
  }
  // The value, sign-extended for int4.
  int value() const { return kSigned && (bits & 0x8) ? int(bits) - 16 : int(bits); }
  explicit operator int() const { return value(); }
  explicit operator float() const { return float(value()); }
  explicit operator double() const { return double(value()); }
  explicit operator bool() const { return bits != 0; }
  template <class U, std::enable_if_t<std::is_integral_v<U> && !std::is_same_v<U, int> &&
                                          !std::is_same_v<U, bool>, int> = 0>
  explicit operator U() const { return static_cast<U>(value()); }
};

using int4 = int4_type<true>;
using uint4 = int4_type<false>;

template <class T> struct is_int4_type : std::false_type {};
template <bool S> struct is_int4_type<int4_type<S>> : std::true_type {};
template <class T> inline constexpr bool is_int4_v = is_int4_type<T>::value;

// The type a kernel computes in for elements of type T: float32 for the
// narrow floats, int for the four-bit integers, T itself otherwise.
template <class T>
using compute_type_t = std::conditional_t<is_small_float_v<T>, float, std::conditional_t<is_int4_v<T>, int, T>>;

}  // namespace meshsim
