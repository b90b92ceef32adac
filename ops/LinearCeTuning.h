//===- LinearCeTuning.h - choices the linear CE makes by timing -*- C++ -*-===//
//
// What prepareLinearCe decides by timing on the GPU in front of it, each
// kept in the tuning database: cuBLASLt's algorithm per GEMM problem, the
// GEMM path per problem (cuBLASLt or lce_gemm, GemmBackend::Auto), and the
// rows per chunk (LinearCeTuning::tuneChunkRows).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_LINEARCETUNING_H
#define TILEJIT_OPS_LINEARCETUNING_H

#include "runtime/Autotuner.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/ops/LinearCe.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tilejit {

/// cuBLASLt's timed algorithm choices, kept in the tuning database per GPU,
/// cuBLASLt version and candidate count (cublaslt::ChoiceStore).
cublaslt::ChoiceStore gemmChoiceStore(const cuda::Device &device, DType dtype);

/// GemmBackend::Auto: per GEMM problem, whichever of cuBLASLt (its chosen
/// algorithm) and lce_gemm ran faster here, timed once in a warm-up run
/// (median of 3 back-to-back runs after one untimed run each; lce_gemm must
/// win by 5%, so that noise does not pick it) and kept in the tuning
/// database per GPU, dtype, cuBLASLt version and tilejit source.
class GemmPaths {
public:
  GemmPaths(const cuda::Device &device, DType dtype);

  /// True when `problem` (everything the choice depends on) runs on
  /// lce_gemm. A problem not chosen yet is looked up, or timed when
  /// `mayTime` (each of `cublas` and `dsl` queues the product once on
  /// `stream`), or else left to cuBLASLt. `flop` (2 M N K; 0 when a
  /// side runs more than the product) is reported beside the times, under
  /// the paths' names.
  bool useDsl(const std::string &problem, double flop,
              const std::function<void()> &cublas,
              const std::function<void()> &dsl, CUstream stream, bool mayTime,
              std::string cublasName = "cuBLASLt",
              std::string dslName = "lce_gemm");

  /// The report covers the problems run from here on (the chunk tuner's
  /// candidates are not the chunk that runs).
  void startReport() {
    used_.clear();
    timedNow_.clear();
  }
  /// Adds the problems run since startReport to info's GEMM-path counts.
  void report(ops::LinearCePlanInfo &info) const;

private:
  struct Choice {
    bool dsl = false, stored = false;
    double cublasLtMs = 0, lceGemmMs = 0; ///< when timed now
    double flop = 0;
    std::string cublasName, dslName;
  };
  TuningDatabase db_;
  TuningKey base_;
  std::map<std::string, Choice> chosen_;
  std::set<std::string> used_, timedNow_;
};

/// Times `step` at each chunk size of `candidates` (`setChunk` makes the
/// loop use it) and picks the fastest (details in LinearCeTuning.cpp).
TuneResult timeChunkCandidates(const std::vector<int64_t> &candidates,
                               const std::function<void(int64_t)> &setChunk,
                               const std::function<void()> &step,
                               CUstream stream);

} // namespace tilejit

#endif // TILEJIT_OPS_LINEARCETUNING_H
