// Storage types for floats narrower than float32: bfloat16, float16 and the
// float8 formats. Each holds its bits; arithmetic converts to float32 and
// rounds back to nearest even, which is how XLA on CPU computes with them.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace meshsim {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// What a format does at the ends of its range.
enum class FloatFlavor {
  IEEE,  // infinities and NaNs as IEEE 754 (float8_e5m2, e4m3, e3m4, float16, bfloat16)
  FN,    // finite: no infinities; exponent and mantissa all ones is NaN (float8_e4m3fn)
  FNUZ,  // finite, unsigned zero: 0x80 is the only NaN, no -0 (float8_e4m3fnuz, e5m2fnuz)
};

// A binary float format with kExp exponent bits, kMant mantissa bits and the
// given bias: encoding from double (one rounding, to nearest even) and decoding.
template <int kExp, int kMant, int kBias, FloatFlavor kFlavor>
struct SmallFloatFormat {
  static constexpr uint32_t kSignBit = 1u << (kExp + kMant);
  static constexpr uint32_t kMaxField = (1u << kExp) - 1;
  static constexpr uint32_t kMantMask = (1u << kMant) - 1;
  static constexpr int kMinExp = 1 - kBias;  // exponent of the smallest normal
  static constexpr uint32_t kTopField = kFlavor == FloatFlavor::IEEE ? kMaxField - 1 : kMaxField;
  static constexpr uint32_t kTopMant = kFlavor == FloatFlavor::FN ? kMantMask - 1 : kMantMask;
  static constexpr uint32_t kNaN = kFlavor == FloatFlavor::FNUZ ? kSignBit
                                   : kFlavor == FloatFlavor::FN ? (kMaxField << kMant) | kMantMask
                                                                 : (kMaxField << kMant) | (1u << (kMant - 1));

  static double max_finite() {
    return std::ldexp(double((1u << kMant) + kTopMant), int(kTopField) - kBias - kMant);
  }

  // Out-of-range values become inf (IEEE) or NaN (FN, FNUZ), as XLA's convert
  // does; FN keeps the sign on that NaN (-1000 -> 0xff in float8_e4m3fn), FNUZ
  // has one NaN.
  static uint32_t encode(double v) {
    const bool neg = std::signbit(v);
    const uint32_t sign = neg ? kSignBit : 0;
    if (std::isnan(v)) return kFlavor == FloatFlavor::FNUZ ? kNaN : kNaN | sign;
    const uint32_t overflow = kFlavor == FloatFlavor::FNUZ ? kNaN
                              : kFlavor == FloatFlavor::FN ? kNaN | sign
                                                           : sign | (kMaxField << kMant);
    const double a = std::fabs(v);
    if (std::isinf(a)) return overflow;
    if (a == 0) return kFlavor == FloatFlavor::FNUZ ? 0 : sign;
    int e;
    std::frexp(a, &e);
    e = std::max(e - 1, kMinExp);  // a = m * 2^e, m in [1, 2) unless subnormal
    // a * 2^(kMant - e) is exact; nearbyint rounds half to even.
    const double q = std::nearbyint(std::ldexp(a, kMant - e));
    if (std::ldexp(q, e - kMant) > max_finite()) return overflow;
    // field * 2^kMant + mantissa == (e - kMinExp) * 2^kMant + q for normals and
    // subnormals alike, and a mantissa rounding up carries into the exponent.
    const uint32_t magnitude = (uint32_t(e - kMinExp) << kMant) + static_cast<uint32_t>(q);
    return magnitude == 0 && kFlavor == FloatFlavor::FNUZ ? 0 : sign | magnitude;  // no -0 in FNUZ
  }

  static float decode(uint32_t bits) {
    const bool neg = bits & kSignBit;
    const uint32_t field = (bits >> kMant) & kMaxField, mant = bits & kMantMask;
    if (kFlavor == FloatFlavor::FNUZ && bits == kSignBit) return std::nanf("");
    if (kFlavor == FloatFlavor::FN && field == kMaxField && mant == kMantMask)
      return neg ? -std::nanf("") : std::nanf("");
    if (kFlavor == FloatFlavor::IEEE && field == kMaxField) {
      const float special = mant ? std::nanf("") : HUGE_VALF;
      return neg ? -special : special;
    }
    const double m = field == 0 ? double(mant) : double((1u << kMant) + mant);
    const float value = static_cast<float>(std::ldexp(m, std::max(int(field), 1) - kBias - kMant));
    return neg ? -value : value;
  }
};

// Compound assignment for the narrow floats (kernels that accumulate in the
// element type, such as a collective's sum): computed in float32, rounded back.
template <class T>
struct NarrowFloatOps {
  T& operator+=(T o) { return self() = T(float(self()) + float(o)); }
  T& operator-=(T o) { return self() = T(float(self()) - float(o)); }
  T& operator*=(T o) { return self() = T(float(self()) * float(o)); }
  T& operator/=(T o) { return self() = T(float(self()) / float(o)); }

 private:
  T& self() { return static_cast<T&>(*this); }
};

// bfloat16: the top half of a float32.
struct bfloat16 : NarrowFloatOps<bfloat16> {
  uint16_t bits;
  using Format = SmallFloatFormat<8, 7, 127, FloatFlavor::IEEE>;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(from_float(f)) {}
  template <class U, std::enable_if_t<std::is_arithmetic_v<U> && !std::is_same_v<U, float>, int> = 0>
  explicit bfloat16(U v) : bits(static_cast<uint16_t>(Format::encode(static_cast<double>(v)))) {}
  operator float() const { return bits_float(uint32_t(bits) << 16); }

  // Round to nearest even on the bits; NaNs stay NaN (quieted), keeping their sign.
  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

// float16 (IEEE binary16), converted by the CPU's F16C instructions where present.
struct float16 : NarrowFloatOps<float16> {
  uint16_t bits;

  float16() = default;
  explicit float16(float f) : bits(from_half(static_cast<_Float16>(f))) {}
  template <class U, std::enable_if_t<std::is_arithmetic_v<U> && !std::is_same_v<U, float>, int> = 0>
  explicit float16(U v) : bits(from_half(static_cast<_Float16>(static_cast<double>(v)))) {}
  operator float() const {
    _Float16 h;
    std::memcpy(&h, &bits, sizeof h);
    return static_cast<float>(h);
  }

 private:
  static uint16_t from_half(_Float16 h) {
    uint16_t b;
    std::memcpy(&b, &h, sizeof b);
    return b;
  }
};

// The one-byte float formats; decoding reads a 256-entry table.
template <int kExp, int kMant, int kBias, FloatFlavor kFlavor>
struct float8 : NarrowFloatOps<float8<kExp, kMant, kBias, kFlavor>> {
  uint8_t bits;
  using Format = SmallFloatFormat<kExp, kMant, kBias, kFlavor>;

  float8() = default;
  template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0>
  explicit float8(U v) : bits(static_cast<uint8_t>(Format::encode(static_cast<double>(v)))) {}
  operator float() const { return table()[bits]; }

 private:
  static const std::array<float, 256>& table() {
    static const std::array<float, 256> t = [] {
      std::array<float, 256> r{};
      for (uint32_t b = 0; b < 256; ++b) r[b] = Format::decode(b);
      return r;
    }();
    return t;
  }
};

using float8_e4m3fn = float8<4, 3, 7, FloatFlavor::FN>;
using float8_e5m2 = float8<5, 2, 15, FloatFlavor::IEEE>;
using float8_e4m3 = float8<4, 3, 7, FloatFlavor::IEEE>;
using float8_e3m4 = float8<3, 4, 3, FloatFlavor::IEEE>;
using float8_e4m3fnuz = float8<4, 3, 8, FloatFlavor::FNUZ>;
using float8_e5m2fnuz = float8<5, 2, 16, FloatFlavor::FNUZ>;
using float8_e4m3b11fnuz = float8<4, 3, 11, FloatFlavor::FNUZ>;

// True for the storage types above: kernels compute with them in float32.
template <class T> struct is_small_float : std::false_type {};
template <> struct is_small_float<bfloat16> : std::true_type {};
template <> struct is_small_float<float16> : std::true_type {};
template <int E, int M, int B, FloatFlavor F> struct is_small_float<float8<E, M, B, F>> : std::true_type {};
template <class T> inline constexpr bool is_small_float_v = is_small_float<T>::value;


}  // namespace meshsim
