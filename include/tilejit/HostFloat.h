//===- HostFloat.h - host-side bf16/fp16 conversions ------------*- C++ -*-===//
//
// Bit-exact conversions between float and the 16-bit float formats, done on
// the host (references, input generators, result checking), plus typed
// element access to untyped host buffers. Narrowing always rounds to nearest,
// ties to even, the rounding the GPU's cvt.rn instructions use.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_HOSTFLOAT_H
#define TILEJIT_HOSTFLOAT_H

#include "tilejit/DType.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tilejit {

inline uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

inline float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// float -> bfloat16 bits, round to nearest even. Overflow gives +-inf; a NaN
/// stays a (quiet) NaN with its sign.
inline uint16_t floatToBf16(float f) {
  uint32_t bits = floatBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    // Truncation could clear every payload bit and turn NaN into inf.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

/// bfloat16 bits -> float (exact).
inline float bf16ToFloat(uint16_t h) {
  return floatFromBits(static_cast<uint32_t>(h) << 16);
}

/// float -> IEEE binary16 bits, round to nearest even, with subnormals.
/// Magnitudes >= 65520 give +-inf; a NaN stays a quiet NaN with its sign.
uint16_t floatToHalf(float f);

/// IEEE binary16 bits -> float (exact, including subnormals, inf and NaN).
float halfToFloat(uint16_t h);

/// Reads element `index` of a host buffer of type `t` (any DType; i1 is one
/// byte, nonzero = 1) as a double. Floats convert exactly.
double loadAsDouble(const void *base, DType t, size_t index);

/// The first `n` elements of a host buffer of float type `t`, as floats.
std::vector<float> loadAsFloats(const void *base, DType t, size_t n);

/// Writes `v` to element `index` of a host buffer of float type `t`. bf16 and
/// f16 round through float (double -> float -> 16-bit, each step RNE), the
/// same path a device store of an fp32 accumulator takes. Throws
/// tilejit::Error for non-float types.
void storeFromDouble(void *base, DType t, size_t index, double v);

/// Checks a scalar that a kernel receives as an f32 argument (a loss weight,
/// the z-loss coefficient, the softcap): throws tilejit::Error naming `what`
/// unless `v` is finite, within the f32 range (|v| <= 3.4028235e38) and, if
/// nonzero, does not round to 0 in f32 (|v| >= about 7e-46). Such values would
/// reach the kernel as inf or 0 and give inf, NaN or a silently wrong loss.
void checkF32Scalar(const std::string &what, double v);

} // namespace tilejit

#endif // TILEJIT_HOSTFLOAT_H
