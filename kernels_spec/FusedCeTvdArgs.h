//===- FusedCeTvdArgs.h - the CE+TVD kernels' arguments ---------*- C++ -*-===//
//
// The buffers of one forward + backward and the kernels' argument lists
// (FusedCeTvd.h), shared by the CPU and GPU runs (FusedCeTvdOp.cpp) and the
// tuner (FusedCeTvdTune.cpp) so the three cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_FUSEDCETVDARGS_H
#define TILEJIT_KERNELS_SPEC_FUSEDCETVDARGS_H

#include "kernels_spec/reference/Inputs.h"
#include "tilejit/DType.h"

#include <cstdint>
#include <vector>

namespace tilejit {
namespace cetvd {

/// Every buffer of one forward + backward.
enum Buf {
  Student,
  Teacher,
  Target,
  Ce,
  Tvd,
  Sigma,
  MaxS,
  LogSumS,
  MaxT,
  LogSumT,
  FastSigns,
  BadTarget,
  GCe,
  GTvd,
  Grad,
  NumBufs
};
/// The pointer arguments of each kernel, in order.
inline const std::vector<Buf> kForwardBufs = {
    Student, Teacher, Target, Ce,      Tvd,       Sigma,
    MaxS,    LogSumS, MaxT,   LogSumT, FastSigns, BadTarget};
inline const std::vector<Buf> kBackwardBufs = {
    Student, Teacher, Target,    Sigma, MaxS, LogSumS,
    MaxT,    LogSumT, FastSigns, GCe,   GTvd, Grad};
/// The per-row f32 outputs of the forward.
inline const std::vector<Buf> kRowOutputs = {Ce,      Tvd,  Sigma,   MaxS,
                                             LogSumS, MaxT, LogSumT, FastSigns};

/// Element type of `b` when the logits are `dtype`.
inline DType bufDType(Buf b, DType dtype) {
  return b == Student || b == Teacher || b == Grad ? dtype
         : b == Target                             ? DType::I64
         : b == BadTarget                          ? DType::I32
                                                   : DType::F32;
}
/// Number of elements of `b`: (BT, V) logits and gradient, one flag, else
/// one per row.
inline int64_t bufCount(Buf b, int64_t BT, int64_t V) {
  return b == Student || b == Teacher || b == Grad ? BT * V
         : b == BadTarget                          ? 1
                                                   : BT;
}

/// The scalar arguments, in one place so that the GPU can point at them.
struct Scalars {
  explicit Scalars(const ref::CeTvdInputs &in)
      : Scalars(in.V, in.V, in.V, ref::kCeTvdIgnoreIndex) {}
  Scalars(int64_t V, int64_t rowStride, int64_t gradStride,
          int64_t ignoreIndex)
      : V(static_cast<int32_t>(V)), rowStride(rowStride),
        gradStride(gradStride), ignoreIndex(ignoreIndex) {}
  int32_t V;
  int64_t rowStride, gradStride;
  int64_t ignoreIndex;
};

/// The arguments of the forward (or, with `backward`, the backward) kernel:
/// buffer(b) for each pointer argument, then scalar(x) for V, row_stride,
/// grad_stride (backward only) and ignore_index.
template <typename Arg, typename BufFn, typename ScalarFn>
std::vector<Arg> kernelArgs(bool backward, const Scalars &s, BufFn buffer,
                            ScalarFn scalar) {
  std::vector<Arg> args;
  for (Buf b : backward ? kBackwardBufs : kForwardBufs)
    args.push_back(buffer(b));
  args.push_back(scalar(s.V));
  args.push_back(scalar(s.rowStride));
  if (backward)
    args.push_back(scalar(s.gradStride));
  args.push_back(scalar(s.ignoreIndex));
  return args;
}

/// kernelArgs() as cuda::launch takes them: the address of each argument.
/// `ptrs` (the device pointers, indexed by Buf) and `s` must outlive the
/// launch.
template <typename DevicePtr>
std::vector<void *> launchArgs(bool backward, const Scalars &s,
                               DevicePtr *ptrs) {
  return kernelArgs<void *>(
      backward, s, [&](Buf b) -> void * { return &ptrs[b]; },
      [](const auto &x) {
        return const_cast<void *>(static_cast<const void *>(&x));
      });
}

/// lse = max + log sum-exp per row (in double, then rounded).
inline void lseFromParts(const std::vector<float> &max,
                         const std::vector<float> &logSum,
                         std::vector<float> &lse) {
  lse.resize(max.size());
  for (size_t r = 0; r < max.size(); ++r)
    lse[r] = static_cast<float>(double(max[r]) + logSum[r]);
}

} // namespace cetvd
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_FUSEDCETVDARGS_H
