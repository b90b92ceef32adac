//===- FusedCeTvd.h - the CE+TVD loss on the caller's memory ----*- C++ -*-===//
//
// The fused cross-entropy + total variation distance loss of
// docs/semantics.md §1 on the caller's memory and stream, in two forms.
//
// Unreduced (as autograd calls it): ceTvdForward writes per-row
//   ce_i  = lse(s_i) - s_iy            tvd_i = 1/2 sum_v |p_iv - q_iv|
// (p = softmax(student), q = softmax(teacher)) and the state the backward
// reads; ceTvdBackward writes
//   grad_i = g_ce_i d ce_i / d s_i + g_tvd_i d tvd_i / d s_i
// for upstream gradients g_ce, g_tvd. One program per row (a cluster of
// programs per row on sm_90 for the forward).
//
// Reduced, with the gradient with respect to the student written by the
// kernel that reads the logits:
//
//   loss = (alpha sum_i ce_i + beta sum_i tvd_i) / n_valid   (mean; 0 when
//   loss =  alpha sum_i ce_i + beta sum_i tvd_i              (sum)  n_valid = 0)
//   grad = d loss / d student, (BT, V), in the logits' dtype
//
// over rows i whose target is not ignore_index (n_valid of them, counted on
// the device). Three launches on the caller's stream: the row weights, the
// loss terms and gradient (each row split over a thread-block cluster on
// sm_90), and a fixed-order sum, so the loss is bitwise reproducible. No
// host synchronization and no allocation: it can be captured in a CUDA graph
// once its kernels are compiled (a first call compiles, or prepare()).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_FUSEDCETVD_H
#define TILEJIT_OPS_FUSEDCETVD_H

#include "tilejit/DType.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

typedef struct CUstream_st *CUstream;

namespace tilejit {
namespace ops {

/// Where an op runs: the GPU (device pointers, on a stream) or the CPU
/// interpreter (host pointers; the stream is ignored; for tests and CI).
enum class Device { Gpu, Cpu };

/// The rows of one unreduced call. Strides are in elements; pointers are
/// device memory on the GPU and host memory on the CPU.
struct CeTvdArgs {
  DType dtype = DType::BF16; ///< of student, teacher and grad: bf16, f16, f32
  int64_t BT = 0;            ///< rows (tokens), in [0, 2^31)
  int64_t V = 0;             ///< vocab, in [1, 2^31)
  const void *student = nullptr; ///< (BT, V) logits, rows rowStride apart
  const void *teacher = nullptr; ///< (BT, V) logits, rows teacherStride apart
  int64_t rowStride = 0;         ///< >= V; 0 means V (contiguous rows)
  /// 0 means rowStride. The kernels take one stride for both: another is
  /// an error (make one of them contiguous).
  int64_t teacherStride = 0;
  const int64_t *target = nullptr; ///< (BT) class indices, contiguous
  int64_t ignoreIndex = -100;      ///< rows with this target give 0
  /// The forward kernel: fused_ce_tvd_fwd (two passes over each row),
  /// fused_ce_tvd_fwd_cluster (each row split over a thread-block cluster;
  /// sm_90+), or empty: the cluster kernel on sm_90+, else the loop kernel.
  std::string forwardKernel;
  /// NAME=VALUE parameters; each kernel takes those naming its own. Empty:
  /// on the GPU with useTuned, each kernel's config `tilejit tune` stored
  /// for this GPU and shape; else its defaults.
  std::vector<std::string> set;
  bool useTuned = true;
};

/// Bytes of the state ceTvdForward leaves for ceTvdBackward (16-byte
/// aligned memory the caller keeps between the two): (BT) f32 each of sigma,
/// max_s, logsum_s, max_t, logsum_t (lse = max + logsum) and the sign
/// flags, then an i32: 0, or 1 + a row whose target is outside [0, V) and
/// not ignore_index (such rows give 0). Never checked on the host.
size_t ceTvdStateBytes(int64_t BT);

/// Enqueues the forward on `stream`: ce and tvd, (BT) f32 each, and the
/// state. Throws tilejit::Error before enqueuing anything for bad shapes,
/// strides, dtypes, null pointers, parameters, or (GPU) no usable GPU. An
/// empty batch launches nothing.
void ceTvdForward(const CeTvdArgs &args, float *ce, float *tvd, void *state,
                  Device device, CUstream stream = nullptr);

/// Enqueues the backward on `stream`: grad, (BT, V) in the logits' dtype,
/// rows gradStride (>= V; 0: V) apart, from the forward's state and the
/// upstream gradients gradCe, gradTvd ((BT) f32 each). The gradient may not
/// overlap the student or teacher (the reduced op writes in place).
void ceTvdBackward(const CeTvdArgs &args, const void *state,
                   const float *gradCe, const float *gradTvd, void *grad,
                   int64_t gradStride, Device device, CUstream stream = nullptr);

/// What prepareCeTvd compiled: each kernel's config and where it came
/// from ("default", "set", or "tuned, <file>"), and the milliseconds from
/// building them in the DSL to their loaded GPU binaries (through the disk
/// cache; the two compile side by side, so both times are that of the pair).
struct CeTvdPrepared {
  std::string forwardKernel, forwardConfig, backwardConfig;
  double forwardJitMs = 0, backwardJitMs = 0;
};

/// Compiles and loads both kernels for `args` on the GPU current on this
/// thread, so that later calls only enqueue (before capturing them in a
/// CUDA graph). The backward is prepared for a gradient whose rows are as
/// 16-byte aligned as the logits' (the usual layout); a gradient of another
/// alignment compiles its kernel on its first call.
CeTvdPrepared prepareCeTvd(const CeTvdArgs &args);

/// One call of the reduced CE+TVD. Strides are in elements. Pointers are
/// device memory on the GPU and host memory on the CPU.
struct CeTvdReducedArgs {
  DType dtype = DType::BF16; ///< of student, teacher and grad: bf16, f16, f32
  int64_t BT = 0;            ///< rows (tokens), in [0, 2^31)
  int64_t V = 0;             ///< vocab, in [1, 2^31)
  const void *student = nullptr; ///< (BT, V) logits, rows rowStride apart
  const void *teacher = nullptr; ///< (BT, V) logits, rows teacherStride apart
  int64_t rowStride = 0;         ///< >= V; 0 means V (contiguous rows)
  /// 0 means rowStride. The kernels take one stride for both: another is
  /// an error (make one of them contiguous).
  int64_t teacherStride = 0;
  const int64_t *target = nullptr; ///< (BT) class indices, contiguous
  /// (BT, V) gradient output, rows gradStride apart. Equal to `student`
  /// (with the same stride): written in place over the student logits.
  void *grad = nullptr;
  int64_t gradStride = 0; ///< >= V; 0 means rowStride
  float *loss = nullptr;  ///< (1) the loss, f32
  /// (BT) f32 each, optional: row i's ce_i and tvd_i (0 for ignored rows);
  /// null: kept in the workspace.
  float *ce = nullptr, *tvd = nullptr;
  /// (1) i32, optional: 0, or 1 + a row whose target is outside
  /// [0, V) and not ignore_index (such rows give loss and gradient 0 but
  /// count in the mean's n_valid);
  /// null: kept in the workspace. Read it when convenient: the op never
  /// synchronizes to check.
  int32_t *badTarget = nullptr;
  int64_t ignoreIndex = -100;
  double alpha = 1, beta = 1; ///< weights; must be f32-representable
  bool mean = true;           ///< mean over the valid rows, else sum
  /// NAME=VALUE parameters of fused_ce_tvd_loss_grad (CLUSTER_SIZE,
  /// num_warps, ...); empty: on the GPU with useTuned, the config `tilejit
  /// tune` stored for this GPU and shape; else the defaults.
  std::vector<std::string> set;
  bool useTuned = true;
  /// The loss + gradient kernel: fused_ce_tvd_loss_grad (empty), each row
  /// split over a cluster by its spec, or ce_tvd_loss_grad, written one
  /// program per row and scheduled by the compiler. `set` names the chosen
  /// kernel's parameters.
  std::string lossGradKernel;
};

/// Bytes of workspace ceTvdReduced needs for `args` (16-byte aligned
/// memory, any contents), e.g. from PyTorch's caching allocator.
size_t ceTvdReducedWorkspaceBytes(const CeTvdReducedArgs &args);

/// Enqueues the loss and gradient on `stream`. Throws tilejit::Error before
/// enqueuing anything for bad shapes, strides, dtypes, null pointers, a
/// workspace smaller than ceTvdReducedWorkspaceBytes, scalars outside f32,
/// or (GPU) no usable GPU. An empty batch (BT = 0) writes loss = 0 and
/// launches no kernel.
void ceTvdReduced(const CeTvdReducedArgs &args, void *workspace,
                  size_t workspaceBytes, Device device,
                  CUstream stream = nullptr);

/// Compiles (through the disk cache) and loads the kernels `args` needs on
/// the GPU current on this thread, so that a later call with the same
/// shape, in-placeness and row alignment only enqueues: call it before
/// capturing ceTvdReduced in a CUDA graph. Returns the loss kernel's config.
std::string prepareCeTvdReduced(const CeTvdReducedArgs &args);

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_FUSEDCETVD_H
