//===- FusedCeTvdOp.h - run the CE+TVD kernels on the CPU or GPU -*- C++
//-*-===//
//
// The host side of the unreduced CE+TVD loss (docs/semantics.md §1): builds
// and compiles fused_ce_tvd_fwd/bwd, launches them with one program per row,
// and checks the results against the fp64 reference.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_HARNESS_FUSEDCETVDOP_H
#define TILEJIT_OPS_HARNESS_FUSEDCETVDOP_H

#include "kernels_spec/reference/Inputs.h"

#include <string>
#include <vector>

namespace tilejit {

struct CeTvdRunOptions {
  std::vector<std::string> overrides; ///< NAME=VALUE for both kernels
  /// The forward kernel: fused_ce_tvd_fwd (two passes over each row),
  /// fused_ce_tvd_fwd_cluster (each row split over a cluster; sm_90), or
  /// empty: the cluster kernel on sm_90 and newer (faster on the H200: 1.074
  /// against 1.289 ms at BT 4096, V 151936, bf16), else the loop kernel
  /// (resolveForwardKernel).
  std::string forwardKernel;
  /// GPU, when `overrides` is empty: each kernel's config from the tuning
  /// database (`tilejit tune`), else its defaults.
  bool useTuned = false;
  std::string arch;    ///< GPU: empty = the device's own
  int iterations = 10; ///< GPU: timed launches of each kernel
};

/// Outputs of one forward + backward. Per-row vectors have BT entries; grad
/// is (BT, V) in the input dtype, contiguous.
struct CeTvdOutputs {
  std::vector<float> ce, tvd, lseS, lseT, sigma;
  std::vector<uint8_t> grad;
  double forwardMs = 0, backwardMs = 0; ///< GPU: median kernel time
  /// GPU: DSL build to loaded function (through the kernel cache), per kernel.
  double forwardJitMs = 0, backwardJitMs = 0;
  double launchHostUs = 0; ///< GPU: host time per launch of a loaded kernel
  std::string device;      ///< "cpu" or the GPU's name
  /// GPU: the config each kernel ran with and where it came from, e.g.
  /// "BLOCK_SIZE=4096 num_warps=8 (tuned, <file>)".
  std::string forwardConfig, backwardConfig;
  std::string forwardKernel; ///< the forward kernel that ran
};

/// Throws the error for the bad_target flag (row + 1 of the first row whose
/// target is outside [0, V) and not ignore_index); 0 means none.
void throwIfBadTarget(const ref::CeTvdInputs &in, int32_t badTarget);

/// The forward kernel for a `--forward=` choice: "loop" (fused_ce_tvd_fwd),
/// "cluster" (fused_ce_tvd_fwd_cluster) or "auto" (empty: chosen by arch).
/// Throws tilejit::Error otherwise.
std::string forwardKernelFor(const std::string &choice);

/// `kernel` itself, or for an empty one the kernel chosen for `arch`
/// ("sm_90", "sm_90a", ...; empty: the CPU interpreter, the loop kernel).
std::string resolveForwardKernel(const std::string &kernel,
                                 const std::string &arch);

/// Per-row upstream gradients used by `tilejit run` (vary by row so that a
/// kernel that ignores them fails the check).
void defaultUpstream(int64_t BT, std::vector<float> &gCe,
                     std::vector<float> &gTvd);

/// Runs both kernels in the CPU interpreter. Throws tilejit::Error for bad
/// shapes, an out-of-range target, or a kernel error.
CeTvdOutputs runCeTvdCpu(const ref::CeTvdInputs &in,
                         const std::vector<float> &gCe,
                         const std::vector<float> &gTvd,
                         const CeTvdRunOptions &options);

/// Compiles for the GPU in front of us and runs both kernels there. Throws
/// tilejit::Error when there is no GPU/driver, and as runCeTvdCpu.
CeTvdOutputs runCeTvdGpu(const ref::CeTvdInputs &in,
                         const std::vector<float> &gCe,
                         const std::vector<float> &gTvd,
                         const CeTvdRunOptions &options);

/// Largest errors against the fp64 reference, on `rows` (all when empty).
/// Where p_v and q_v tie to within fp32 accuracy, either sign of p - q is
/// accepted (with its effect on sigma and the row's TVD gradient).
struct CeTvdCheck {
  double ceErr = 0, tvdErr = 0, lseErr = 0, sigmaErr = 0; ///< max |abs|
  double gradErr = 0; ///< max |g - ref| / (atol + rtol |ref|), <= 1 passes
  int64_t rowsChecked = 0;
  bool passed = false;
  std::string summary; ///< human-readable, one line per quantity
};
CeTvdCheck checkCeTvd(const ref::CeTvdInputs &in, const std::vector<float> &gCe,
                      const std::vector<float> &gTvd, const CeTvdOutputs &out,
                      std::vector<int64_t> rows = {});

/// Rows to compare after a GPU run (the fp64 reference of every row of a
/// large batch takes minutes): the first and last 7 (every 7th row is
/// ignored, so these include ignored rows) and `count` spread evenly.
/// Empty (all rows) when `count` is 0 or covers the batch.
std::vector<int64_t> sampleCheckRows(int64_t BT, int64_t count);

} // namespace tilejit

#endif // TILEJIT_OPS_HARNESS_FUSEDCETVDOP_H
