//===- HostFloat.cpp - host-side fp16 conversions and typed access --------===//
//
// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
//
//===----------------------------------------------------------------------===//
#include "tilejit/HostFloat.h"
#include "tilejit/Error.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace tilejit {

namespace {

// Rounds `mant >> shift` to nearest even (shift in [1, 31]).
uint32_t shiftRightRne(uint32_t mant, unsigned shift) {
  uint32_t kept = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u)))
    ++kept;
  return kept;
}

// |f| < 2^-14: the result is a binary16 subnormal (or zero), k * 2^-24.
uint16_t smallFloatToHalf(uint32_t absBits) {
  unsigned exp = absBits >> 23;
  if (exp < 102) // below 2^-25, which itself ties to the even 0
    return 0;
  uint32_t mant = (absBits & 0x7FFFFFu) | 0x800000u;
  // value = mant * 2^(exp - 150) = k * 2^-24 with k = mant >> (126 - exp).
  // Rounding up to k = 0x400 correctly yields the smallest normal.
  return static_cast<uint16_t>(shiftRightRne(mant, 126 - exp));
}

} // namespace

uint16_t floatToHalf(float f) {
  uint32_t bits = floatBits(f);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7FFFFFFFu;
  if (absBits > 0x7F800000u) // NaN: keep the top payload bits, force quiet
    return sign | 0x7E00u | ((absBits >> 13) & 0x3FFu);
  if (absBits >= 0x477FF000u) // >= 65520 (incl. inf): rounds past 65504
    return sign | 0x7C00u;
  if (absBits < 0x38800000u)
    return sign | smallFloatToHalf(absBits);
  // Normal: rebias the exponent (127 -> 15), then drop 13 mantissa bits.
  // A carry out of the mantissa correctly bumps the exponent.
  uint32_t rebiased = absBits - (112u << 23);
  return sign | static_cast<uint16_t>(shiftRightRne(rebiased, 13));
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in float
    float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) // inf or NaN, payload kept
    return floatFromBits(sign | 0x7F800000u | (mant << 13));
  return floatFromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

std::vector<float> loadAsFloats(const void *base, DType t, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(loadAsDouble(base, t, i));
  return out;
}

double loadAsDouble(const void *base, DType t, size_t index) {
  switch (t) {
  case DType::I1:
    return static_cast<const uint8_t *>(base)[index] != 0 ? 1.0 : 0.0;
  case DType::I32:
    return static_cast<const int32_t *>(base)[index];
  case DType::I64:
    return static_cast<double>(static_cast<const int64_t *>(base)[index]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(base)[index]);
  case DType::F32:
    return static_cast<const float *>(base)[index];
  }
  throw Error("loadAsDouble: invalid dtype");
}

void storeFromDouble(void *base, DType t, size_t index, double v) {
  float f = static_cast<float>(v);
  switch (t) {
  case DType::BF16:
    static_cast<uint16_t *>(base)[index] = floatToBf16(f);
    return;
  case DType::F16:
    static_cast<uint16_t *>(base)[index] = floatToHalf(f);
    return;
  case DType::F32:
    static_cast<float *>(base)[index] = f;
    return;
  default:
    throw Error(std::string("storeFromDouble: dtype ") + dtypeName(t) +
                " is not a float type (expected bf16, f16 or f32)");
  }
}

void checkF32Scalar(const std::string &what, double v) {
  auto fail = [&](const char *why) {
    char value[32];
    std::snprintf(value, sizeof(value), "%.9g", v);
    throw Error(what + " = " + value + " " + why);
  };
  if (!std::isfinite(v))
    fail("must be finite");
  float f = static_cast<float>(v);
  if (std::isinf(f))
    fail("is beyond the f32 range the kernels compute in (|x| <= "
         "3.4028235e38)");
  if (v != 0 && f == 0)
    fail("is nonzero but rounds to 0 in f32 (|x| >= 1.4e-45 is needed)");
}

} // namespace tilejit
