//===- TensorMap.cpp - tensor map parameters and their launch values -----===//
//
// The limits are cuTensorMapEncodeTiled's (CUDA Driver API reference,
// "Tensor Map Object Management"): a 16-byte aligned address, strides that
// are multiples of 16 bytes below 2^40 and no shorter than the line they
// step over, extents from 1 to 2^32; extents stop
// at 2^31 - 1 here because the copy's coordinates are signed 32-bit.
//
//===----------------------------------------------------------------------===//
#include "tilejit/TensorMap.h"

#include <cstdint>

namespace tilejit {

std::vector<int64_t> flattenTensorMap(const TensorMapParam &p) {
  return {p.pointer,           p.elementBytes,      p.inner.param,
          p.inner.value,       p.outer.param,       p.outer.value,
          p.outerStride.param, p.outerStride.value, p.boxInner,
          p.boxOuter,          p.swizzleBytes};
}

bool unflattenTensorMap(const std::vector<int64_t> &f, TensorMapParam &p) {
  if (f.size() != 11)
    return false;
  p.pointer = int(f[0]);
  p.elementBytes = int(f[1]);
  p.inner = {int(f[2]), f[3]};
  p.outer = {int(f[4]), f[5]};
  p.outerStride = {int(f[6]), f[7]};
  p.boxInner = int(f[8]);
  p.boxOuter = int(f[9]);
  p.swizzleBytes = int(f[10]);
  return p.pointer >= 0 && p.elementBytes == 2 && p.boxInner > 0 &&
         p.boxOuter > 0 &&
         (p.swizzleBytes == 32 || p.swizzleBytes == 64 ||
          p.swizzleBytes == 128);
}

bool resolveTensorMap(const TensorMapParam &param, uint64_t address,
                      int64_t inner, int64_t outer, int64_t outerStride,
                      TensorMapShape &shape, std::string &why) {
  const int64_t bytes = param.elementBytes;
  if (address % 16 != 0) {
    why = "the address is not a multiple of 16 bytes";
    return false;
  }
  if (inner < 1 || outer < 1 || inner > INT32_MAX || outer > INT32_MAX) {
    why = "an extent is outside [1, 2^31)";
    return false;
  }
  if (outerStride < inner || outerStride > (int64_t(1) << 40) / bytes ||
      outerStride * bytes % 16 != 0) {
    why = "the stride is not a multiple of 16 bytes from the line's length "
          "to 2^40";
    return false;
  }
  if (param.boxInner * bytes > param.swizzleBytes || param.boxOuter > 256 ||
      param.boxInner < 1 || param.boxOuter < 1) {
    why = "the box does not fit the swizzle";
    return false;
  }
  shape.address = address;
  shape.dims[0] = uint64_t(inner);
  shape.dims[1] = uint64_t(outer);
  shape.strideBytes = uint64_t(outerStride * bytes);
  shape.box[0] = uint32_t(param.boxInner);
  shape.box[1] = uint32_t(param.boxOuter);
  shape.elementBytes = param.elementBytes;
  shape.swizzleBytes = param.swizzleBytes;
  return true;
}

} // namespace tilejit
