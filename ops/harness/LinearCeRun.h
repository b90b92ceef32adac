//===- LinearCeRun.h - host storage of one linear CE run --------*- C++ -*-===//
//
// The buffers of one run of the op (inputs from ref::LinearCeInputs, the
// outputs LinearCeOutputs returns), shared by the CPU runner, which points
// the op at them, and the GPU runner, which mirrors them on the device.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_HARNESS_LINEARCERUN_H
#define TILEJIT_OPS_HARNESS_LINEARCERUN_H

#include "ops/harness/LinearCeOp.h"

#include <functional>

namespace tilejit {

struct LinearCeHostRun {
  std::vector<float> bias; ///< widened to f32, as the op takes it
  DType acc;               ///< of dW and db
  std::vector<uint8_t> dh, dW, db;
  float loss[2] = {0, 0};
  int32_t bad = 0;
  /// The op's arguments, pointing at host memory: the inputs in `in`, the
  /// outputs here and in `out`.
  ops::LinearCeArgs args;

  LinearCeHostRun(const ref::LinearCeInputs &in, const LinearCeOptions &o,
                  LinearCeOutputs &out);
  /// Replaces each pointer of args by fn(pointer, bytes, is an input).
  void forEachBuffer(
      const std::function<const void *(const void *, size_t, bool)> &fn);
  /// Checks the bad-target flag and fills `out` from the buffers.
  void finish(const ref::LinearCeInputs &in, const LinearCeOptions &o,
              LinearCeOutputs &out);
};

/// Throws the error for the op's bad-target flag (1 + a row whose target is
/// outside [0, V) and not ignore_index); 0 means none.
void throwIfBadLinearCeTarget(const ref::LinearCeInputs &in,
                              const LinearCeOptions &o, int32_t bad);

} // namespace tilejit

#endif // TILEJIT_OPS_HARNESS_LINEARCERUN_H
