//===- FusedCeTvdReducedOp.h - the reduced CE+TVD on host vectors -*- C++ -*-===//
//
// ops::ceTvdReduced (tilejit/ops/FusedCeTvd.h) on host vectors, for `tilejit
// run|bench|tune` and the tests. The reduced API of docs/semantics.md §1:
//   loss = (alpha sum_i ce_i + beta sum_i tvd_i) / n_valid   (mean)
//   loss =  alpha sum_i ce_i + beta sum_i tvd_i              (sum)
// with the student gradient produced in the same pass that reads the logits
// (fused_ce_tvd_loss_grad: each row read once, held on chip by a cluster of
// programs), optionally in place into the student buffer. Three launches, no
// host synchronization: ce_tvd_row_weights (n_valid, on the GPU),
// fused_ce_tvd_loss_grad, ce_tvd_loss_sum (a fixed-order sum: the loss is
// bitwise reproducible).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_HARNESS_FUSEDCETVDREDUCEDOP_H
#define TILEJIT_OPS_HARNESS_FUSEDCETVDREDUCEDOP_H

#include "ops/harness/FusedCeTvdOp.h"

#include <functional>

namespace tilejit {

struct CeTvdReducedOptions {
  double alpha = 1, beta = 1; ///< weights of the CE and TVD terms
  bool mean = true;           ///< mean over non-ignored rows, else sum
  bool inPlace = false;       ///< write the gradient over the student logits
  /// NAME=VALUE for the loss + gradient kernel (CLUSTER_SIZE, num_warps).
  std::vector<std::string> overrides;
  /// ops::CeTvdReducedArgs::lossGradKernel: empty, fused_ce_tvd_loss_grad
  /// or ce_tvd_loss_grad.
  std::string lossGradKernel;
  bool useTuned = false; ///< GPU: the tuned config when `overrides` is empty
  /// GPU: empty or the device's own (the op compiles for the current GPU).
  std::string arch;
  int iterations = 10;   ///< GPU: timed runs (all three launches each)
};

struct CeTvdReducedOutputs {
  float loss = 0;
  float nValid = 0;           ///< rows not ignored (as the kernel counted)
  std::vector<float> ce, tvd; ///< per row, 0 for ignored rows
  std::vector<uint8_t> grad;  ///< (BT, V) in the input dtype, d loss / d s
  double ms = 0;              ///< GPU: median time of one loss + gradient
  double jitMs = 0;           ///< GPU: DSL build to loaded functions
  std::string device;         ///< "cpu" or the GPU's name
  std::string config;         ///< fused_ce_tvd_loss_grad's config and source
};

/// "mean" -> true, "sum" -> false; throws tilejit::Error otherwise.
bool parseReduction(const std::string &name);

/// Runs ops::ceTvdReduced in the CPU interpreter. Throws tilejit::Error for
/// bad shapes, an out-of-range target or a kernel error.
CeTvdReducedOutputs runCeTvdReducedCpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options);
/// The same on the GPU (sm_90 or newer: thread-block clusters), on a stream
/// of its own, timed with CUDA events on that stream (an in-place student is
/// restored before each timed run, untimed). Also throws when there is no
/// GPU or driver, `arch` is not the GPU's, or V does not fit the config on
/// chip.
CeTvdReducedOutputs runCeTvdReducedGpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options);

/// Checks per-row ce/tvd and the gradient on `rows` (all when empty) against
/// the fp64 reference (checkCeTvd with g_ce = alpha s, g_tvd = beta s), and
/// the loss against the fp64 sum of the kernel's per-row terms and n_valid
/// against the targets.
CeTvdCheck checkCeTvdReduced(const ref::CeTvdInputs &in,
                             const CeTvdReducedOptions &options,
                             const CeTvdReducedOutputs &out,
                             std::vector<int64_t> rows = {});

/// Tunes fused_ce_tvd_loss_grad for in's shape on the GPU (or returns the
/// stored entry) and stores the winner in the tuning database. Returns the
/// winner as overrides; `table` (if given) receives one line per candidate,
/// and `progress` (if given) a line per step as the tuner goes (compiling,
/// then each candidate's time or why it was skipped).
std::vector<std::string> tuneCeTvdReducedGpu(
    const ref::CeTvdInputs &in, const CeTvdReducedOptions &options, bool retune,
    std::string *table = nullptr,
    const std::function<void(const std::string &)> &progress = nullptr);

} // namespace tilejit

#endif // TILEJIT_OPS_HARNESS_FUSEDCETVDREDUCEDOP_H
