//===- TensorMap.h - tensor maps a launch builds for the copy engine -*- C++ -*-===//
//
// On sm_90, a dot loop's blocks can be copied into shared memory by the
// tensor memory accelerator (TMA), which reads a 2-D view through a tensor
// map: a 128-byte descriptor of the view's address, extents and stride that
// only the host can build (cuTensorMapEncodeTiled). simt-tensor-maps records,
// for each view a dot loop reads, which kernel parameters hold those values;
// each launch (Kernel::launch) reads them from the arguments, encodes the
// map and passes it as an extra parameter after the kernel's own, followed by
// one 32-bit mask of the maps that could be encoded. A view the copy engine
// cannot read (an address or stride not a multiple of 16 bytes, an extent
// past 2^31) leaves its bit clear, and the kernel copies that loop's blocks
// with cp.async instead.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TENSORMAP_H
#define TILEJIT_TENSORMAP_H

#include <cstdint>
#include <string>
#include <vector>

namespace tilejit {

/// A value a launch knows: kernel parameter `param` (a scalar, sign-extended
/// to 64 bits), or the constant `value` where param < 0.
struct LaunchValue {
  int param = -1;
  int64_t value = 0;
};

/// One tensor map a kernel takes: a row-major view of `outer` lines of
/// `inner` contiguous elements, `outerStride` elements apart, at the address
/// in pointer parameter `pointer`. Each copy moves a box of `boxOuter` lines
/// of `boxInner` elements, swizzled in `swizzleBytes` (32, 64 or 128) as
/// wgmma's K-major layouts are; elements outside the view read 0.
struct TensorMapParam {
  int pointer = -1;
  int elementBytes = 2;
  LaunchValue inner, outer, outerStride;
  int boxInner = 0, boxOuter = 0;
  int swizzleBytes = 128;
};

/// `param` as 11 integers (the order of its fields above, a LaunchValue as
/// param then value), as the IR and the kernel cache record it.
std::vector<int64_t> flattenTensorMap(const TensorMapParam &param);
/// The inverse of flattenTensorMap; false for a list not 11 long or a map
/// the launch cannot encode (a negative pointer index, elements other than
/// 16-bit, an empty box, a swizzle other than 32, 64 or 128 bytes).
bool unflattenTensorMap(const std::vector<int64_t> &fields,
                        TensorMapParam &param);

/// A tensor map's fields for one launch, in cuTensorMapEncodeTiled's units.
struct TensorMapShape {
  uint64_t address = 0;
  uint64_t dims[2] = {0, 0};  ///< elements: inner, outer
  uint64_t strideBytes = 0;   ///< between lines along outer
  uint32_t box[2] = {0, 0};   ///< elements: inner, outer
  int elementBytes = 2;
  int swizzleBytes = 128;
};

/// The shape of `param` for an address and values read from a launch's
/// arguments, or the reason the copy engine cannot read that view (returned
/// in `why`, shape left unset): the address or stride in bytes not a
/// multiple of 16, an extent below 1 or above 2^31 - 1 (coordinates are
/// signed 32-bit), a stride shorter than a line or above 2^40 bytes.
bool resolveTensorMap(const TensorMapParam &param, uint64_t address,
                      int64_t inner, int64_t outer, int64_t outerStride,
                      TensorMapShape &shape, std::string &why);

} // namespace tilejit

#endif // TILEJIT_TENSORMAP_H
