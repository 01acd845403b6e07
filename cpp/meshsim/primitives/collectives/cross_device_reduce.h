// How XLA's CPU runtime combines the members' blocks of an all-reduce or a
// reduce-scatter (psum, pmax, pmin, psum_scatter and the all-reduces that
// combine partial results outside shard_map), element by element:
//  - each element starts from the reduction's identity (+0 for a sum, so a sum
//    of -0s is +0; -inf / +inf for max / min, or the lowest / highest value of
//    a type without infinities) and takes the members' values in member order;
//  - max keeps its running value unless the member's is larger, min unless it
//    is smaller: a NaN never wins, and an element that is NaN on every member
//    ends at the identity;
//  - XLA converts bfloat16 to float32 around the collective (one rounding, at
//    the end) and every float8 format to float16; float16 adds in float32 and
//    rounds back after each member;
//  - float32/float64 arithmetic reads subnormal operands as zero and writes
//    subnormal results as zero (of their sign), as XLA's CPU threads run;
//  - NaN bits: a float32/float64 sum that meets a NaN member takes that NaN
//    (quieted), keeps a running NaN otherwise, and inf + -inf is x86's default
//    NaN (negative); a float16 sum keeps its running NaN first and writes NaNs
//    as the canonical quiet NaN of their sign; converting float16 back to
//    float8_e5m2 gives 0x7f for every NaN, and the finite float8 formats keep
//    the sign of a value they cannot hold.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "meshsim/core/element_types.h"
#include "meshsim/kernels/integer_wrap.h"

namespace meshsim {

enum class Reduce { Sum, Max, Min };

namespace cross_device {

template <class F>
using FloatBits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

template <class F>
F with_bits(FloatBits<F> b) {
  F f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
template <class F>
FloatBits<F> bits_of(F f) {
  FloatBits<F> b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
template <class F>
constexpr FloatBits<F> kQuietBit = FloatBits<F>(1) << (std::numeric_limits<F>::digits - 2);
template <class F>
constexpr FloatBits<F> kSignBit = FloatBits<F>(1) << (sizeof(F) * 8 - 1);

template <class F>
F flush_subnormal(F v) {
  return std::fabs(v) < std::numeric_limits<F>::min() ? std::copysign(F(0), v) : v;
}

// x86's default NaN: the quiet NaN with the sign bit set.
template <class F>
F default_nan() {
  return with_bits<F>(bits_of(std::numeric_limits<F>::quiet_NaN()) | kSignBit<F>);
}

// The sum of two float32/float64 values as XLA's CPU all-reduce computes it
// (operands already flushed).
template <class F>
F wide_sum(F acc, F x) {
  const F r = flush_subnormal(acc + x);
  if (r == r) return r;
  if (x != x) return with_bits<F>(bits_of(x) | kQuietBit<F>);
  return acc != acc ? acc : default_nan<F>();
}

// float16 rounding of a float32 value; NaNs become the quiet NaN of their sign.
inline float round_to_half(float v) {
  if (v != v) return std::copysign(std::numeric_limits<float>::quiet_NaN(), v);
  return float(float16(v));
}

// The sum of two float16 values held in float32: added in float32, rounded to
// float16; a running NaN wins over the member's.
inline float half_sum(float acc, float x) {
  const float r = acc + x;
  if (r == r) return round_to_half(r);
  return round_to_half(acc != acc ? acc : x != x ? x : default_nan<float>());
}

template <class T> struct FlavorOf;
template <int E, int M, int B, FloatFlavor F>
struct FlavorOf<float8<E, M, B, F>> {
  static constexpr FloatFlavor value = F;
};

// A float16 value (held in float32) converted to the float8 type T as XLA's
// convert does.
template <class T>
T half_to_float8(float v) {
  T r(v);
  constexpr FloatFlavor flavor = FlavorOf<T>::value;
  if (v != v && std::is_same_v<T, float8_e5m2>) {
    r.bits = 0x7f;  // float8_e5m2 is float16's top byte: XLA keeps the NaN's low bits set
  } else if (flavor == FloatFlavor::FN && float(r) != float(r) && std::signbit(v)) {
    r.bits |= T::Format::kSignBit;
  }
  return r;
}

// How elements of T enter the reduction (widen), are summed, leave it (narrow)
// and where max/min start: in T itself for integers and bool, in float32 or
// float64 for bfloat16 and the wide floats, in float16 (held in float32) for
// float16 and float8.
template <class T, class = void>
struct Combine {  // integers (sums wrap) and bool (max: any, min: all)
  using Acc = T;
  static T widen(T x) { return x; }
  static T sum(T acc, T x) { return add_op(acc, x); }
  static T narrow(T acc) { return acc; }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T highest() { return std::numeric_limits<T>::max(); }
};
template <class T>
struct Combine<T, std::enable_if_t<std::is_floating_point_v<T> || std::is_same_v<T, bfloat16>>> {
  using Acc = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;
  static Acc widen(T x) { return flush_subnormal(Acc(x)); }
  static Acc sum(Acc acc, Acc x) { return wide_sum(acc, x); }
  static T narrow(Acc acc) { return T(acc); }
  static Acc lowest() { return -std::numeric_limits<Acc>::infinity(); }
  static Acc highest() { return std::numeric_limits<Acc>::infinity(); }
};
template <class T>
struct Combine<T, std::enable_if_t<is_small_float_v<T> && !std::is_same_v<T, bfloat16>>> {
  using Acc = float;
  static float widen(T x) { return float(x); }
  static float sum(float acc, float x) { return half_sum(acc, x); }
  static T narrow(float acc) {
    if constexpr (std::is_same_v<T, float16>) return float16(acc);
    else return half_to_float8<T>(acc);
  }
  static float lowest() { return -HUGE_VALF; }
  static float highest() { return HUGE_VALF; }
};

}  // namespace cross_device

// Reduces element i of `n` members, each `count` elements of T laid out
// alike, into out[i]. Complex numbers reduce as pairs of their parts.
template <class T>
void reduce_across_members(Reduce op, const T* const* members, int64_t n, T* out, int64_t count) {
  if constexpr (is_complex_v<T>) {
    using F = typename T::value_type;
    std::vector<const F*> parts(n);
    for (int64_t m = 0; m < n; ++m) parts[m] = reinterpret_cast<const F*>(members[m]);
    reduce_across_members<F>(op, parts.data(), n, reinterpret_cast<F*>(out), 2 * count);
  } else {
    using C = cross_device::Combine<T>;
    using A = typename C::Acc;
    std::vector<A> widened;
    A* acc;
    if constexpr (std::is_same_v<A, T>) {
      acc = out;
    } else {
      widened.resize(count);
      acc = widened.data();
    }
    std::fill(acc, acc + count, op == Reduce::Sum ? A(0) : op == Reduce::Max ? C::lowest() : C::highest());
    for (int64_t m = 0; m < n; ++m) {
      const T* x = members[m];
      switch (op) {
        case Reduce::Sum:
          for (int64_t i = 0; i < count; ++i) acc[i] = C::sum(acc[i], C::widen(x[i]));
          break;
        case Reduce::Max:  // std::max(acc, x)
          for (int64_t i = 0; i < count; ++i) {
            const A v = C::widen(x[i]);
            acc[i] = acc[i] < v ? v : acc[i];
          }
          break;
        case Reduce::Min:  // std::min(acc, x)
          for (int64_t i = 0; i < count; ++i) {
            const A v = C::widen(x[i]);
            acc[i] = v < acc[i] ? v : acc[i];
          }
          break;
      }
    }
    if constexpr (!std::is_same_v<A, T>)
      for (int64_t i = 0; i < count; ++i) out[i] = C::narrow(acc[i]);
  }
}

}  // namespace meshsim
