// Integer arithmetic that wraps around as XLA's does, shared by the elementwise
// kernels (scalar_math.h), reductions and collectives. It runs on an unsigned
// type at least as wide as `unsigned`: signed overflow (and uint16 * uint16,
// promoted to int) is undefined behaviour in C++.
#pragma once
#include <type_traits>

namespace meshsim {

template <class T, bool = std::is_integral_v<T>>
struct ArithType { using type = T; };
template <class T>
struct ArithType<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <>
struct ArithType<bool, true> { using type = bool; };
// The type T's arithmetic runs in: T itself for floats (and SIMD vectors).
template <class T> using Arith = typename ArithType<T>::type;

template <class T> T add_op(T x, T y) { return T(Arith<T>(x) + Arith<T>(y)); }
template <class T> T sub_op(T x, T y) { return T(Arith<T>(x) - Arith<T>(y)); }
template <class T> T mul_op(T x, T y) { return T(Arith<T>(x) * Arith<T>(y)); }
template <class T> T neg_op(T x) {
  if constexpr (std::is_floating_point_v<T>) return -x;  // -0.0 for 0.0
  else return T(Arith<T>(0) - Arith<T>(x));
}

}  // namespace meshsim
