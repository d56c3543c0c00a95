#pragma once
// IEEE binary16 (float16) and bfloat16 <-> float conversions, round to
// nearest even, NaN kept NaN, overflow to infinity. fp16/bf16 reductions are
// computed in float and rounded back once per step.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dl::coll {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;                 // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00;                // overflow (and inf)
  if (abs < 0x38800000u) {                                     // half subnormal or zero
    float v = std::nearbyint(std::fabs(f) * 16777216.0f);     // * 2^24, ties to even
    return sign | static_cast<uint16_t>(v);
  }
  const uint32_t m = abs - 0x38000000u;                        // rebias 127 -> 15
  return sign | static_cast<uint16_t>((m + 0xfffu + ((m >> 13) & 1u)) >> 13);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace dl::coll
