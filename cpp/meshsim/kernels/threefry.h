// Threefry-2x32 with 20 rounds (Salmon et al., Random123), the hash behind
// JAX's default PRNG. Shared by the `threefry2x32` and `random_bits` kernels so
// both are the same function bit for bit.
#pragma once
#include <cstdint>

namespace meshsim {

namespace threefry_detail {

template <int D>
inline uint32_t rotl(uint32_t v) { return (v << D) | (v >> (32 - D)); }

// Four rounds of mix with compile-time rotations, so loops over many
// counters vectorise.
template <int R0, int R1, int R2, int R3>
inline void mix4(uint32_t& x0, uint32_t& x1) {
  x0 += x1; x1 = rotl<R0>(x1) ^ x0;
  x0 += x1; x1 = rotl<R1>(x1) ^ x0;
  x0 += x1; x1 = rotl<R2>(x1) ^ x0;
  x0 += x1; x1 = rotl<R3>(x1) ^ x0;
}

}  // namespace threefry_detail

// Hashes the counter (x0, x1) in place under the key (k0, k1).
inline void threefry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  using namespace threefry_detail;
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;  // the key-schedule parity word
  x0 += k0; x1 += k1;
  mix4<13, 15, 26, 6>(x0, x1);  x0 += k1; x1 += k2 + 1u;
  mix4<17, 29, 16, 24>(x0, x1); x0 += k2; x1 += k0 + 2u;
  mix4<13, 15, 26, 6>(x0, x1);  x0 += k0; x1 += k1 + 3u;
  mix4<17, 29, 16, 24>(x0, x1); x0 += k1; x1 += k2 + 4u;
  mix4<13, 15, 26, 6>(x0, x1);  x0 += k2; x1 += k0 + 5u;
}

}  // namespace meshsim
