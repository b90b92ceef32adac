//===- CApiOps.cpp - tilejit.h's losses over tilejit/ops/ -----------------===//
#include "tilejit/tilejit.h"

#include "ops/CApiGuard.h"
#include "tilejit/ops/CrossEntropy.h"
#include "tilejit/ops/Distillation.h"
#include "tilejit/ops/FusedCeTvd.h"
#include "tilejit/ops/LinearCe.h"

#include <cstring>
#include <string>
#include <vector>

using namespace tilejit;
using capi::guarded;
using capi::require;

namespace {

std::vector<std::string> setOf(const char *const *set, size_t n) {
  require(set || n == 0, "null parameter array");
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    require(set[i] != nullptr, "null parameter string");
    out.push_back(set[i]);
  }
  return out;
}

DType dtypeOf(int32_t dtype) {
  require(dtype >= TILEJIT_I1 && dtype <= TILEJIT_F32, "unknown tilejit_dtype");
  return DType(dtype);
}

ops::Device deviceOf(int32_t device) {
  require(device == TILEJIT_DEVICE_GPU || device == TILEJIT_DEVICE_CPU,
          "unknown tilejit_device");
  return device == TILEJIT_DEVICE_GPU ? ops::Device::Gpu : ops::Device::Cpu;
}

ops::CeTvdReducedArgs argsOf(const tilejit_ce_tvd_reduced_args *c) {
  require(c != nullptr, "null tilejit_ce_tvd_reduced_args");
  ops::CeTvdReducedArgs a;
  a.dtype = dtypeOf(c->dtype);
  a.BT = c->bt;
  a.V = c->v;
  a.student = c->student;
  a.teacher = c->teacher;
  a.rowStride = c->row_stride;
  a.teacherStride = c->teacher_stride;
  a.target = c->target;
  a.grad = c->grad;
  a.gradStride = c->grad_stride;
  a.loss = c->loss;
  a.ce = c->ce;
  a.tvd = c->tvd;
  a.badTarget = c->bad_target;
  a.ignoreIndex = c->ignore_index;
  a.alpha = c->alpha;
  a.beta = c->beta;
  a.mean = c->mean != 0;
  a.set = setOf(c->set, c->n_set);
  return a;
}

ops::CeTvdArgs argsOf(const tilejit_ce_tvd_args *c) {
  require(c != nullptr, "null tilejit_ce_tvd_args");
  ops::CeTvdArgs a;
  a.dtype = dtypeOf(c->dtype);
  a.BT = c->bt;
  a.V = c->v;
  a.student = c->student;
  a.teacher = c->teacher;
  a.rowStride = c->row_stride;
  a.teacherStride = c->teacher_stride;
  a.target = c->target;
  a.ignoreIndex = c->ignore_index;
  a.forwardKernel = c->forward_kernel ? c->forward_kernel : "";
  a.set = setOf(c->set, c->n_set);
  return a;
}

ops::Reduction reductionOf(int32_t r) {
  require(r >= TILEJIT_REDUCTION_NONE && r <= TILEJIT_REDUCTION_SUM,
          "unknown tilejit_reduction");
  return r == TILEJIT_REDUCTION_NONE   ? ops::Reduction::None
         : r == TILEJIT_REDUCTION_MEAN ? ops::Reduction::Mean
                                       : ops::Reduction::Sum;
}

/// The fields the cross-entropy and linear-CE structs share, under the same
/// names on both sides of the ABI.
template <typename C, typename A> void lossFieldsOf(const C *c, A &a) {
  a.dtype = dtypeOf(c->dtype);
  a.V = c->v;
  a.target = c->target;
  a.classWeight = c->class_weight;
  a.gradOutput = c->grad_output;
  a.ignoreIndex = c->ignore_index;
  a.labelSmoothing = c->label_smoothing;
  a.zLoss = c->z_loss;
  a.softcap = c->softcap;
  a.reduction = reductionOf(c->reduction);
  a.loss = c->loss;
  a.rowLoss = c->row_loss;
  a.rowZLoss = c->row_z_loss;
  a.badTarget = c->bad_target;
}

ops::CrossEntropyArgs argsOf(const tilejit_cross_entropy_args *c) {
  require(c != nullptr, "null tilejit_cross_entropy_args");
  ops::CrossEntropyArgs a;
  lossFieldsOf(c, a);
  a.BT = c->bt;
  a.logits = c->logits;
  a.grad = c->grad;
  a.gradScale = c->grad_scale;
  return a;
}

ops::LinearCeArgs argsOf(const tilejit_linear_ce_args *c) {
  require(c != nullptr, "null tilejit_linear_ce_args");
  require(c->gemm_backend >= TILEJIT_GEMM_CUBLASLT &&
              c->gemm_backend <= TILEJIT_GEMM_AUTO,
          "unknown tilejit_gemm_backend");
  ops::LinearCeArgs a;
  lossFieldsOf(c, a);
  a.N = c->n;
  a.d = c->d;
  a.input = c->input;
  a.inputStride = c->input_stride;
  a.weight = c->weight;
  a.weightStride = c->weight_stride;
  a.bias = c->bias;
  a.lse = c->lse;
  a.gradInput = c->grad_input;
  a.gradInputStride = c->grad_input_stride;
  a.gradWeight = c->grad_weight;
  a.gradBias = c->grad_bias;
  a.chunkRows = c->chunk_rows;
  a.memoryBudgetBytes = c->memory_budget_bytes;
  a.gemmWorkspaceBytes = c->gemm_workspace_bytes;
  a.narrowLogits = c->narrow_logits != 0;
  a.bf16GradAccumulation = c->bf16_grad_accumulation != 0;
  a.gemmBackend = ops::GemmBackend(c->gemm_backend);
  a.set = setOf(c->set, c->n_set);
  return a;
}

static_assert(int(ops::Divergence::KlForward) == TILEJIT_KL_FORWARD &&
                  int(ops::Divergence::KlReverse) == TILEJIT_KL_REVERSE &&
                  int(ops::Divergence::Jsd) == TILEJIT_JSD &&
                  int(ops::Divergence::JsdLogits) == TILEJIT_JSD_LOGITS,
              "tilejit_divergence follows ops::Divergence");

ops::DistillationArgs argsOf(const tilejit_distillation_args *c) {
  require(c != nullptr, "null tilejit_distillation_args");
  require(c->divergence >= TILEJIT_KL_FORWARD &&
              c->divergence <= TILEJIT_JSD_LOGITS,
          "unknown tilejit_divergence");
  ops::DistillationArgs a;
  a.divergence = ops::Divergence(c->divergence);
  a.dtype = dtypeOf(c->dtype);
  a.BT = c->bt;
  a.V = c->v;
  a.student = c->student;
  a.teacher = c->teacher;
  a.grad = c->grad;
  a.label = c->label;
  a.ignoreIndex = c->ignore_index;
  a.temperature = c->temperature;
  a.beta = c->beta;
  a.reduction = reductionOf(c->reduction);
  a.gradOutput = c->grad_output;
  a.loss = c->loss;
  a.rowLoss = c->row_loss;
  return a;
}

} // namespace

extern "C" {

void tilejit_ce_tvd_reduced_args_init(tilejit_ce_tvd_reduced_args *args) {
  if (!args)
    return;
  std::memset(args, 0, sizeof(*args));
  args->dtype = TILEJIT_BF16;
  args->ignore_index = -100;
  args->alpha = args->beta = 1;
  args->mean = 1;
}

void tilejit_ce_tvd_args_init(tilejit_ce_tvd_args *args) {
  if (!args)
    return;
  std::memset(args, 0, sizeof(*args));
  args->dtype = TILEJIT_BF16;
  args->ignore_index = -100;
}

void tilejit_linear_ce_args_init(tilejit_linear_ce_args *args) {
  if (!args)
    return;
  std::memset(args, 0, sizeof(*args));
  ops::LinearCeArgs defaults;
  args->dtype = TILEJIT_BF16;
  args->ignore_index = defaults.ignoreIndex;
  args->reduction = TILEJIT_REDUCTION_MEAN;
  args->gemm_workspace_bytes = defaults.gemmWorkspaceBytes;
  args->gemm_backend = TILEJIT_GEMM_CUBLASLT;
}

size_t tilejit_ce_tvd_state_bytes(int64_t bt) {
  return ops::ceTvdStateBytes(bt);
}

int tilejit_ce_tvd_prepare(const tilejit_ce_tvd_args *args) {
  return guarded([&] { ops::prepareCeTvd(argsOf(args)); });
}

int tilejit_ce_tvd_forward(const tilejit_ce_tvd_args *args, float *ce,
                           float *tvd, void *state, int32_t device,
                           void *stream) {
  return guarded([&] {
    ops::ceTvdForward(argsOf(args), ce, tvd, state, deviceOf(device),
                      static_cast<CUstream>(stream));
  });
}

int tilejit_ce_tvd_backward(const tilejit_ce_tvd_args *args, const void *state,
                            const float *grad_ce, const float *grad_tvd,
                            void *grad, int64_t grad_stride, int32_t device,
                            void *stream) {
  return guarded([&] {
    ops::ceTvdBackward(argsOf(args), state, grad_ce, grad_tvd, grad,
                       grad_stride, deviceOf(device),
                       static_cast<CUstream>(stream));
  });
}

int tilejit_linear_ce_workspace_bytes(const tilejit_linear_ce_args *args,
                                      int32_t device, size_t *bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null output");
    *bytes = ops::linearCeWorkspaceBytes(argsOf(args), deviceOf(device));
  });
}

int tilejit_linear_ce_prepare(const tilejit_linear_ce_args *args,
                              void *workspace, size_t workspace_bytes,
                              int32_t gemm_candidates, int32_t tune_chunk_rows,
                              void *stream, int64_t *chunk_rows) {
  return guarded([&] {
    ops::LinearCeTuning tuning;
    tuning.gemmCandidates = gemm_candidates;
    tuning.tuneChunkRows = tune_chunk_rows != 0;
    ops::LinearCePlanInfo info =
        ops::prepareLinearCe(argsOf(args), workspace, workspace_bytes, tuning,
                             static_cast<CUstream>(stream));
    if (chunk_rows)
      *chunk_rows = info.chunkRows;
  });
}

int tilejit_linear_ce(const tilejit_linear_ce_args *args, void *workspace,
                      size_t workspace_bytes, int32_t device, void *stream) {
  return guarded([&] {
    ops::linearCe(argsOf(args), workspace, workspace_bytes, deviceOf(device),
                  static_cast<CUstream>(stream));
  });
}

int tilejit_ce_tvd_reduced_workspace_bytes(
    const tilejit_ce_tvd_reduced_args *args, size_t *bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null output");
    *bytes = ops::ceTvdReducedWorkspaceBytes(argsOf(args));
  });
}

int tilejit_ce_tvd_reduced_prepare(const tilejit_ce_tvd_reduced_args *args,
                                   char *config, size_t config_capacity) {
  return guarded([&] {
    std::string used = ops::prepareCeTvdReduced(argsOf(args));
    if (config && config_capacity > 0) {
      size_t n = std::min(used.size(), config_capacity - 1);
      std::memcpy(config, used.data(), n);
      config[n] = '\0';
    }
  });
}

int tilejit_ce_tvd_reduced(const tilejit_ce_tvd_reduced_args *args,
                           void *workspace, size_t workspace_bytes,
                           int32_t device, void *stream) {
  return guarded([&] {
    ops::ceTvdReduced(argsOf(args), workspace, workspace_bytes,
                      deviceOf(device), static_cast<CUstream>(stream));
  });
}

void tilejit_cross_entropy_args_init(tilejit_cross_entropy_args *args) {
  if (!args)
    return;
  std::memset(args, 0, sizeof(*args));
  args->dtype = TILEJIT_BF16;
  args->ignore_index = -100;
  args->reduction = TILEJIT_REDUCTION_MEAN;
  args->grad_scale = 1;
}

int tilejit_cross_entropy_workspace_bytes(
    const tilejit_cross_entropy_args *args, size_t *bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null output");
    *bytes = ops::crossEntropyWorkspaceBytes(argsOf(args));
  });
}

int tilejit_cross_entropy_prepare(const tilejit_cross_entropy_args *args,
                                  int32_t device) {
  return guarded(
      [&] { ops::prepareCrossEntropy(argsOf(args), deviceOf(device)); });
}

int tilejit_cross_entropy(const tilejit_cross_entropy_args *args,
                          void *workspace, size_t workspace_bytes,
                          int32_t device, void *stream) {
  return guarded([&] {
    ops::crossEntropy(argsOf(args), workspace, workspace_bytes,
                      deviceOf(device), static_cast<CUstream>(stream));
  });
}

void tilejit_distillation_args_init(tilejit_distillation_args *args) {
  if (!args)
    return;
  std::memset(args, 0, sizeof(*args));
  args->divergence = TILEJIT_KL_FORWARD;
  args->dtype = TILEJIT_BF16;
  args->ignore_index = -100;
  args->temperature = 1;
  args->beta = 0.5;
  args->reduction = TILEJIT_REDUCTION_MEAN;
}

int tilejit_distillation_workspace_bytes(const tilejit_distillation_args *args,
                                         size_t *bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null output");
    *bytes = ops::distillationWorkspaceBytes(argsOf(args));
  });
}

int tilejit_distillation_prepare(const tilejit_distillation_args *args,
                                 int32_t device) {
  return guarded(
      [&] { ops::prepareDistillation(argsOf(args), deviceOf(device)); });
}

int tilejit_distillation(const tilejit_distillation_args *args,
                         void *workspace, size_t workspace_bytes,
                         int32_t device, void *stream) {
  return guarded([&] {
    ops::distillation(argsOf(args), workspace, workspace_bytes,
                      deviceOf(device), static_cast<CUstream>(stream));
  });
}

} // extern "C"
