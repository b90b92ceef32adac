//===- RowOpParts.h - what the ops on rows of logits share ------*- C++ -*-===//
//
// The ops of tilejit/ops/ run the same call on the GPU (device pointers, on
// the caller's stream) or in the CPU interpreter (host pointers): how they
// pass buffers and run kernels either way, and the checks they make of the
// caller's workspace and buffers.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_ROWOPPARTS_H
#define TILEJIT_OPS_ROWOPPARTS_H

#include "tilejit/Error.h"
#include "tilejit/Kernel.h"
#include "tilejit/ops/FusedCeTvd.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilejit {
namespace ops {

/// A buffer of `n` elements of `t` as a kernel argument: bounded on the CPU
/// (the interpreter checks every access against it), unbounded on the GPU.
inline KernelArg bufferArg(const void *p, DType t, int64_t n, Device device) {
  return KernelArg::pointer(p, t, device == Device::Cpu ? n : -1);
}

/// `programs` programs of `kernel`: run in the interpreter on the CPU, or
/// enqueued on `stream` on the GPU.
inline void runOrLaunch(Device device, CUstream stream, const Kernel &kernel,
                        int64_t programs, const std::vector<KernelArg> &args) {
  if (device == Device::Cpu)
    kernel.runOnCpu({programs}, args);
  else
    kernel.launch({programs}, args, stream);
}

/// Throws tilejit::Error, prefixed "op: ", for a workspace smaller than
/// `needed` bytes or not 16-byte aligned.
inline void checkWorkspace(const std::string &op, const void *workspace,
                           size_t bytes, size_t needed) {
  if (!workspace || bytes < needed)
    throw Error(op + ": the workspace has " + std::to_string(bytes) +
                " bytes, " + std::to_string(needed) + " needed");
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    throw Error(op + ": the workspace must be 16-byte aligned");
}

/// Whether two (rows, V) buffers of `es`-byte elements, rows strideA and
/// strideB elements apart, share a byte of their extents (first to last
/// element): an output overlapping an input other than exactly in place
/// would be read after it is written.
inline bool extentsOverlap(const void *a, int64_t strideA, const void *b,
                           int64_t strideB, int64_t rows, int64_t V,
                           size_t es) {
  if (rows <= 0 || !a || !b)
    return false;
  auto begin = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
  uintptr_t endA = begin(a) + size_t((rows - 1) * strideA + V) * es;
  uintptr_t endB = begin(b) + size_t((rows - 1) * strideB + V) * es;
  return begin(a) < endB && begin(b) < endA;
}

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_ROWOPPARTS_H
