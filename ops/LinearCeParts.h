//===- LinearCeParts.h - what the linear CE's CPU and GPU paths share -----===//
//
// The workspace layout, the kernels' configs and their argument lists, so
// that the interpreter and the GPU run one chunk loop with the same
// buffers.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_LINEARCEPARTS_H
#define TILEJIT_OPS_LINEARCEPARTS_H

#include "tilejit/Kernel.h"
#include "tilejit/ops/LinearCe.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <optional>
#include <string>

namespace tilejit {
namespace ops {
namespace lce {

inline int64_t orDefault(int64_t stride, int64_t d) {
  return stride ? stride : d;
}
inline int64_t inputStride(const LinearCeArgs &a) {
  return orDefault(a.inputStride, a.d);
}
inline int64_t weightStride(const LinearCeArgs &a) {
  return orDefault(a.weightStride, a.d);
}
inline int64_t gradInputStride(const LinearCeArgs &a) {
  return orDefault(a.gradInputStride, a.d);
}

/// The dtype the chunk's logits are stored in: the input dtype with
/// narrowLogits (dz then overwrites them), else f32 (and dz has a buffer of
/// the input dtype, unless the inputs are f32 too).
inline DType logitsType(const LinearCeArgs &a) {
  return a.narrowLogits ? a.dtype : DType::F32;
}
inline bool dzInPlace(const LinearCeArgs &a) {
  return logitsType(a) == a.dtype;
}
/// dW and db accumulate in f32, or bf16 on request.
inline DType accType(const LinearCeArgs &a) {
  return a.bf16GradAccumulation ? DType::BF16 : DType::F32;
}
/// The factor dz is stored with: N for a mean over f16 inputs (whose dz of
/// size ~p/N would underflow f16), else 1.
inline float dzScale(const LinearCeArgs &a) {
  return a.dtype == DType::F16 && a.reduction == Reduction::Mean ? float(a.N)
                                                                 : 1.f;
}
/// Whether the GPU run needs cuBLASLt's workspace.
inline bool usesCublasLt(const LinearCeArgs &a) {
  return a.gemmBackend != GemmBackend::Dsl;
}

/// Whether the chunk's logits may come from lce_logits, which folds each
/// row's max and sum-exp per block of columns into its epilogue, so that
/// lce_logits_grad (PARTIALS=1) reads the logits once: bf16/f16 inputs on
/// the DSL path (always) or the auto path (where timing picks it).
inline bool mayFoldLogits(const LinearCeArgs &a) {
  return a.dtype != DType::F32 && a.gemmBackend != GemmBackend::CublasLt;
}
/// The prefix of the --set entries that pin lce_logits' parameters.
inline constexpr llvm::StringLiteral kLogitsPrefix = "lce_logits.";
/// Those entries, without the prefix.
std::vector<std::string> logitsOverrides(const LinearCeArgs &a);
/// lce_logits' config for the call: the --set entries prefixed
/// "lce_logits." (it shares lce_gemm's parameter names, not its values),
/// then the problem's features.
dsl::Config logitsConfig(const LinearCeArgs &a);
/// Column blocks of lce_logits per row.
int64_t logitsBlocks(const LinearCeArgs &a);
/// Floats between two rows' partials: the blocks rounded up to 16 bytes,
/// as lce_logits_grad loads them in 16-byte groups.
inline int64_t partialsStride(int64_t blocks) { return (blocks + 3) / 4 * 4; }

/// Byte offsets into the workspace; each part 256-byte aligned (cuBLASLt's
/// and the vector loads' alignment). A part the caller provides is empty.
struct Layout {
  size_t stats = 0, bad = 0, loss = 0, rowLoss = 0, rowZLoss = 0, lse = 0,
         logits = 0, dz = 0, partials = 0, ones = 0, gemm = 0, bytes = 0;
  /// lce_logits' column blocks, partialsStride of them and the floats of
  /// each partials array: 0 when the layout has no partials.
  int64_t blocks = 0, partialsStride = 0, partialCount = 0;
};
Layout layout(const LinearCeArgs &a, Device device, int64_t chunk);

/// The workspace's parts as pointers, and the optional inputs replaced by a
/// valid address (the kernels mask their loads of an absent one).
struct Buffers {
  char *ws = nullptr;
  float *stats, *loss, *rowLoss, *rowZLoss, *lse;
  int32_t *bad;
  void *logits, *dz, *ones, *gemm;
  const float *bias, *classWeight, *gradOutput;
  /// lce_logits' row max and sum-exp, (chunk, blocks) each, rows
  /// partialsStride apart; with no partials, blocks = 0 and both point at
  /// stats.
  float *rowMax, *rowSum;
  int64_t blocks = 0, stride = 0, partialCount = 5;
};
Buffers buffers(const LinearCeArgs &a, const Layout &l, void *workspace);

/// The problem lce_logits_grad is specialized for (features compiled in).
std::map<std::string, int64_t> problem(const LinearCeArgs &a);

/// The programs of the chunk loop, with logits of `rowsType`: rowsFolded
/// (lce_logits_grad on lce_logits' partials) where mayFoldLogits.
struct Programs {
  Kernel weights, rows, sum;
  std::optional<Kernel> rowsFolded;
};
Programs buildPrograms(const LinearCeArgs &a, DType rowsType);

/// lce_gemm's config for one product: the --set entries naming its
/// parameters, then the transposes and C's dtype.
dsl::Config gemmConfig(const LinearCeArgs &a, bool transA, bool transB,
                       bool cF32);

/// The arguments of each program (`logits` and `dz` of the chunk at row
/// `firstRow`; the buffers' element counts bound the CPU's accesses).
std::vector<KernelArg> weightsArgs(const LinearCeArgs &a, const Buffers &b);
std::vector<KernelArg> rowsArgs(const LinearCeArgs &a, const Buffers &b,
                                KernelArg logits, KernelArg dz,
                                int64_t firstRow);
/// lce_logits' arguments for the `rows` rows of the chunk at `firstRow`.
std::vector<KernelArg> logitsArgs(const LinearCeArgs &a, const Buffers &b,
                                  KernelArg logits, int64_t firstRow,
                                  int64_t rows);
std::vector<KernelArg> sumArgs(const LinearCeArgs &a, const Buffers &b);

/// Chunk sizes worth timing: N split into k equal chunks (rounded as in
/// linearCeChunkRows) for the fewest chunks that fit and for 1.5x, 2x, 4x
/// and 8x as many, none under 128 rows but the first; ascending.
std::vector<int64_t> chunkCandidates(const LinearCeArgs &a);

/// Throws unless `workspace` holds linearCeWorkspaceBytes (and, on the GPU,
/// is 256-byte aligned).
void checkWorkspace(const LinearCeArgs &a, const void *workspace,
                    size_t bytes, Device device);

/// The N = 0 call: loss 0, dW and db zeros, nothing launched.
void emptyBatch(const LinearCeArgs &a, Device device, CUstream stream);

/// The CPU path (LinearCe.cpp) and the GPU path (LinearCeGpu.cpp).
void runOnCpu(const LinearCeArgs &a, const Buffers &b, int64_t chunk);
void runOnGpu(const LinearCeArgs &a, void *workspace, size_t bytes,
              CUstream stream);

/// The steps of one chunk, for timing them one at a time on the GPU.
enum class Step { LogitsGemm, RowsProgram, DhGemm, DwGemm };
/// Enqueues `step` of the first chunk of a prepared call on `stream`.
void enqueueFirstChunkStep(const LinearCeArgs &a, void *workspace,
                           size_t bytes, Step step, CUstream stream);

} // namespace lce
} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_LINEARCEPARTS_H
