//===- Dialects.h - the tile and simt dialects ------------------*- C++ -*-===//
//
// Include this (MLIR-heavy) header only from the few translation units that
// work on IR: the DSL builder, the passes, the interpreter and the emitter.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_IR_DIALECTS_H
#define TILEJIT_IR_DIALECTS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tilejit/DType.h"

#include <algorithm>
#include <optional>

#include "ir/TileEnums.h.inc"

#include "ir/TileDialect.h.inc"
#define GET_TYPEDEF_CLASSES
#include "ir/TileTypes.h.inc"
#define GET_OP_CLASSES
#include "ir/TileOps.h.inc"

#include "ir/SimtDialect.h.inc"
#define GET_OP_CLASSES
#include "ir/SimtOps.h.inc"

namespace mlir {
class DialectRegistry;
}

namespace tilejit {

/// Attribute names on a kernel's func.func.
namespace attr {
constexpr const char *kKernel = "tile.kernel";      // unit: this is a kernel
constexpr const char *kNumWarps = "tile.num_warps"; // i64
constexpr const char *kClusterSize = "tile.cluster_size"; // i64, 1 = none
// Row schedules (tile-split-rows, tile-keep-rows). i64 C: each row (a
// program along x as written) is split over C programs of a cluster, and
// launches run C times as many programs along x.
constexpr const char *kSplitRows = "tile.split_rows";
// i64 C, set by tile-split-rows once it has split the rows: what launches
// multiply grid.x by.
constexpr const char *kRowsSplit = "tile.rows_split";
// i64, 1: a row walked again is kept in shared memory instead of re-read.
constexpr const char *kKeepRow = "tile.keep_row";
// i64, 1: a walk's loads are issued one tile ahead (tile-load-ahead).
constexpr const char *kLoadAhead = "tile.load_ahead";
// i64, 1: a walk that chooses by a condition fixed before it runs as one
// walk per value of the condition (tile-unswitch).
constexpr const char *kUnswitch = "tile.unswitch";
// i64, 1: two walks over the same row, the second needing nothing the
// first computes, run as one (tile-fuse-walks).
constexpr const char *kFuseWalks = "tile.fuse_walks";
// i64, 1: a walk's whole tiles run without their bound masks, its partial
// tile in a walk of its own (tile-peel-tail).
constexpr const char *kPeelTail = "tile.peel_tail";
// unit, on a row walk: tile-peel-tail's walk over what is left past the
// whole tiles (one partial tile where the masks bound the walk).
constexpr const char *kTailWalk = "tile.tail_walk";
// i64, 1 to 7: a kept row's tiles are copied into shared memory that many
// walk iterations ahead of their use (tile-copy-ahead).
constexpr const char *kCopyAhead = "tile.copy_ahead";
// i64, 2 to 8: the blocks a dot loop keeps in flight (tile-pipeline-dot;
// absent: 3).
constexpr const char *kDotStages = "tile.dot_stages";
// unit: a dot loop's warps split into a producer and a consumer warpgroup
// where the GPU code allows it (sm_90a, 8 warps).
constexpr const char *kDotSpecialize = "tile.dot_specialize";
// unit: the kernel asks for resident programs (simt-resident-programs
// decides whether it can have them).
constexpr const char *kResidentRequest = "tile.resident";
// unit, on a kernel (simt-resident-programs): each launched block runs the
// programs blockIdx.x, blockIdx.x + gridDim.x, ... of the grid passed after
// the tensor maps' mask (three i32: programs along x, y, z); its dot loop
// (marked `resident`) keeps its ring from one program to the next.
constexpr const char *kResident = "simt.resident";
// i64: the longest row the kernel is compiled for (0 or absent: unknown);
// tile-keep-rows sizes its arrays to it.
constexpr const char *kRowExtent = "tile.row_extent";
// unit, on a row walk: tile-keep-rows' walk past the kept part of a row,
// which runs only for rows longer than tile.row_extent (schedules that
// trade registers for latency leave it alone).
constexpr const char *kRowTail = "tile.row_tail";
// i64: __launch_bounds__'s minimum blocks per SM (registers are capped to
// fit them); absent or 0 = no minimum.
constexpr const char *kMinProgramsPerSm = "tile.min_programs_per_sm";
// i64: the programs per SM a kernel asks the compiler for
// (PROGRAMS_PER_SM; tile-choose-occupancy); absent or 0 = its choice.
constexpr const char *kProgramsPerSm = "tile.programs_per_sm";
constexpr const char *kConstexprs = "tile.constexprs"; // dictionary name -> int
constexpr const char *kThreads = "simt.threads";       // i64, set by layout
constexpr const char *kVec = "simt.vec";               // i64, set by layout
// i64 array [N0, G0, N1, G1, ...], set by layout: the group width of the
// tiles of N elements that row ops keep within threads (see layoutGroup).
constexpr const char *kGroups = "simt.groups";
constexpr const char *kAccessVec = "vec"; // i64 on simt.load/store/copy_async
// unit, on a pointer argument: it may share memory with another argument
// (an output written in place over an input), so it is not __restrict__.
constexpr const char *kMayAlias = "tile.may_alias";
// unit, on a kernel: every vectorizable load, store and copy group starts at
// an address aligned to its size (KernelBuilder::assumeAlignedVectors).
constexpr const char *kAlignedVectors = "tile.aligned_vectors";
// i64, on a kernel: bytes of dynamic shared memory its tile.shared_alloc
// arrays take (0 or absent: none).
constexpr const char *kSharedBytes = "tile.shared_bytes";
// string, on a kernel argument: the name the DSL declared it with (for
// argument checks and error messages; no effect on the code).
constexpr const char *kArgName = "tile.arg_name";
// i64, on a kernel (simt-cluster-barriers): the mbarriers its cluster
// combines use; on each tile.cluster_reduce, its first one and its slot
// buffers (1, or 2 used in turn in a loop).
constexpr const char *kClusterMbarriers = "simt.cluster_mbarriers";
constexpr const char *kClusterMbarrier = "cluster_mbarrier";
constexpr const char *kClusterBuffers = "cluster_buffers";
// array of i64 arrays, on a kernel (simt-tensor-maps): the tensor maps each
// launch passes after the kernel's arguments (tilejit/TensorMap.h), each
// [pointer, element bytes, inner param, inner value, outer param, outer
// value, stride param, stride value, box inner, box outer, swizzle bytes].
constexpr const char *kTensorMaps = "simt.tensor_maps";
} // namespace attr

/// The DType of a scalar MLIR type (i1, i32, i64, bf16, f16, f32), or none.
std::optional<DType> dtypeOfScalar(mlir::Type t);

/// The kernel argument or shared array a pointer is derived from, through
/// tile.addptr.
mlir::Value pointerRoot(mlir::Value ptr);

/// Tiles live in registers, N / P elements per thread for P threads: beyond
/// this many per thread a kernel cannot be register-allocated (ptxas runs for
/// minutes, then spills everything), and the lowering's per-thread arrays
/// would not fit in memory. The DSL, tile-verify and tile-lower-to-simt reject
/// larger tiles. With P at most 1024 it also keeps every index in i32.
constexpr int64_t kMaxElementsPerThread = 256;

/// ceil(n / d) for n >= 0, d > 0, without overflow.
inline int64_t ceilDiv(int64_t n, int64_t d) { return n / d + (n % d != 0); }

/// The group width of a tile of K = N / P elements per thread where no row
/// op asks for another: `vec` (simt.vec) capped by the largest power of two
/// dividing K, so that the width divides K.
inline int64_t defaultLayoutGroup(int64_t vec, int64_t perThread) {
  return perThread <= 0 ? 1 : std::min(vec, perThread & -perThread);
}

/// The group width of a tile of `tileElements` elements in `kernel` (a
/// func.func): thread t holds element e of its part at tile position
/// (e / G) * P * G + t * G + e % G. G is the kernel's simt.groups entry for
/// that size, else defaultLayoutGroup(simt.vec, K = N / P), else (no layout
/// yet: hand-written IR) K.
int64_t layoutGroup(mlir::Operation *kernel, int64_t tileElements);

/// Registers tile, simt and the upstream dialects tilejit programs use
/// (func, arith, math, scf, vector).
void registerTilejitDialects(mlir::DialectRegistry &registry);

} // namespace tilejit

#endif // TILEJIT_IR_DIALECTS_H
