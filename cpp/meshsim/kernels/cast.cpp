#include "meshsim/kernels/cast.h"

#include <cmath>
#include <type_traits>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/elementwise.h"
#include "meshsim/kernels/scalar_math.h"

namespace meshsim {
namespace {

// The casts with a kernel of their own (see via_float32).
template <class In, class Out>
constexpr bool is_bit_level_cast() {
  return (std::is_same_v<In, bfloat16> && std::is_same_v<Out, bool>) ||
         ((std::is_same_v<In, bfloat16> || std::is_same_v<In, float16>) && std::is_same_v<Out, float8_e5m2>);
}

// Values float32 holds exactly, so converting them to float32 first and then
// to a narrow float rounds once, as the direct conversion does.
template <class T>
constexpr bool exact_in_float32() {
  return std::is_same_v<T, bool> || std::is_same_v<T, float> || std::is_same_v<T, complex64> ||
         is_small_float_v<T> || (std::is_integral_v<T> && sizeof(T) <= 2) || std::is_same_v<T, int4> ||
         std::is_same_v<T, uint4>;
}

// A cast from or into a narrow float (bfloat16, float16, float8) is computed
// in float32 anyway: the narrow value widens to float32 exactly and every
// conversion of it reads that float32; a value float32 holds exactly is
// rounded once into the narrow format either way. Such casts run as two,
// through float32, so only the casts into and out of float32 are compiled for
// the nine narrow formats (and not every pair of dtypes).
template <class In, class Out>
constexpr bool via_float32() {
  if constexpr (std::is_same_v<In, float> || std::is_same_v<Out, float> || is_bit_level_cast<In, Out>()) return false;
  else return is_small_float_v<In> || (is_small_float_v<Out> && exact_in_float32<In>());
}

}  // namespace

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  return dispatch_any_dtype(t.dtype(), [&](auto from) {
    using In = decltype(from);
    return dispatch_any_dtype(dtype, [&](auto to) {
      using Out = decltype(to);
      if constexpr (via_float32<In, Out>())
        return cast(cast(t, DType::Float32), dtype);
      // XLA tests a bfloat16 for zero on its bits: a subnormal is true, not flushed as a
      // float32 comparison would read it (core/denormals.h).
      else if constexpr (std::is_same_v<In, bfloat16> && std::is_same_v<Out, bool>)
        return map_unary<In, Out>(t, dtype, [](In x) { return (x.bits & 0x7fff) != 0; });
      // XLA converts a 16-bit float to float8_e5m2 on its bits, giving every NaN as 0x7f (a
      // float32 or float64 NaN keeps its sign: 0x7e / 0xfe).
      else if constexpr ((std::is_same_v<In, bfloat16> || std::is_same_v<In, float16>) &&
                         std::is_same_v<Out, float8_e5m2>)
        return map_unary<In, Out>(t, dtype, [](In x) {
          const float f = compute_type_t<In>(x);
          if (!std::isnan(f)) return convert_op<Out>(f);
          Out nan;
          nan.bits = 0x7f;
          return nan;
        });
      else
        return map_unary<In, Out>(t, dtype, [](In x) { return convert_op<Out>(compute_type_t<In>(x)); });
    });
  });
}

}  // namespace meshsim
