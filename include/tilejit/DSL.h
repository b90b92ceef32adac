//===- DSL.h - the embedded C++ DSL for tile programs -----------*- C++ -*-===//
//
// Kernel authors write straight-line C++ over tiles and scalars; the builder
// records it as a tile-dialect kernel. This header deliberately includes no
// MLIR so kernel specs compile fast; values are opaque handles.
//
//   KernelBuilder k("row_sum", config);
//   Value x = k.pointerArg("x", DType::F32), V = k.scalarArg("V", DType::I32);
//   Var acc = k.constant(0.0, DType::F32);          // loop-carried, no
//   iter_args k.forRange(0, V, BLOCK, [&](Value i) {
//     Value offs = i + k.arange(BLOCK);
//     acc = acc + k.load(x, offs, offs < V, 0.0).sum();
//   });
//
// Mixed operands are promoted: scalars broadcast to tiles, i32 widens to i64,
// bf16/f16 widen to f32; mixing integers with floats needs an explicit .to().
// Mistakes (shape or dtype mismatches, values used outside their loop, bad
// parameters) throw tilejit::Error naming the kernel, the operation and the
// kernel-spec source line.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_DSL_H
#define TILEJIT_DSL_H

#include "tilejit/DType.h"
#include "tilejit/Error.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilejit {

class TileModule;

namespace dsl {

class KernelBuilder;

/// The most shared memory one block may take on sm_90 (227 KiB), so the
/// most all of a kernel's sharedArray()s may take together.
constexpr int64_t kMaxSharedArrayBytes = 227 * 1024;

/// Source position of a DSL call, captured by default arguments so that IR
/// locations (and NVRTC errors through #line) point at the kernel spec.
struct SourceLoc {
  const char *file;
  int line;
  static SourceLoc here(const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    return {file, line};
  }
};

/// A scalar, a 1-D tile, or a pointer, owned by a KernelBuilder.
class Value {
public:
  Value() = default;
  bool valid() const { return impl_ != nullptr; }
  bool isTile() const;
  bool isPointer() const;
  /// Number of elements (1 for scalars).
  int64_t size() const;
  /// Element type (for a pointer: the pointee type).
  DType dtype() const;

  /// Conversion to another element type (extf/truncf/sitofp/extsi/...).
  Value to(DType type) const;
  /// Reductions of a tile to a scalar (accumulate in the tile's type).
  Value sum() const;
  Value max() const;
  Value min() const;
  /// Row reductions of a tile holding a row-major R x `cols` matrix: the
  /// tile of the R results (each row combined in column order). When `cols`
  /// divides KernelBuilder::threadGroup of the matrix, each row lies within
  /// one thread on the GPU and the reduction (and broadcastRows back) costs
  /// only the combines; otherwise it goes through shared memory with two
  /// barriers.
  Value sumRows(int64_t cols) const;
  Value maxRows(int64_t cols) const;
  Value minRows(int64_t cols) const;

  KernelBuilder &builder() const;
  void *raw() const { return impl_; }
  Value(KernelBuilder *kb, void *impl) : kb_(kb), impl_(impl) {}

protected:
  KernelBuilder *kb_ = nullptr;
  void *impl_ = nullptr;
};

/// A lane mask for load and store: a boolean tile, or std::nullopt for
/// none (every lane in range).
using Mask = std::optional<Value>;

/// A mutable value. Assigning to a Var inside forRange/ifThen bodies makes it
/// loop-carried (or an if result) without hand-written iter_args.
class Var : public Value {
public:
  Var(Value init);
  Var(const Var &) = delete;
  ~Var();
  Var &operator=(Value v);
  Var &operator=(const Var &v) { return *this = static_cast<Value>(v); }
};

// Arithmetic and comparisons; a double operand becomes a constant of the
// other operand's type.
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator%(Value a, Value b);
Value operator-(Value a);
Value operator<(Value a, Value b);
Value operator<=(Value a, Value b);
Value operator>(Value a, Value b);
Value operator>=(Value a, Value b);
Value operator==(Value a, Value b);
Value operator!=(Value a, Value b);
Value operator&&(Value a, Value b);
Value operator||(Value a, Value b);
Value operator!(Value a);
#define TILEJIT_DSL_SCALAR_OVERLOADS(op)                                       \
  Value operator op(Value a, double b);                                        \
  Value operator op(double a, Value b);
TILEJIT_DSL_SCALAR_OVERLOADS(+)
TILEJIT_DSL_SCALAR_OVERLOADS(-)
TILEJIT_DSL_SCALAR_OVERLOADS(*)
TILEJIT_DSL_SCALAR_OVERLOADS(/)
TILEJIT_DSL_SCALAR_OVERLOADS(<)
TILEJIT_DSL_SCALAR_OVERLOADS(<=)
TILEJIT_DSL_SCALAR_OVERLOADS(>)
TILEJIT_DSL_SCALAR_OVERLOADS(>=)
TILEJIT_DSL_SCALAR_OVERLOADS(==)
TILEJIT_DSL_SCALAR_OVERLOADS(!=)
#undef TILEJIT_DSL_SCALAR_OVERLOADS

Value max(Value a, Value b); // NaN-propagating, as torch.maximum
Value min(Value a, Value b);
/// The smaller of a and b, or the other one where one is NaN (C's fminf,
/// torch.fmin).
Value minNum(Value a, Value b);
/// |a| with the sign bit of b (floats; C's copysignf).
Value copysign(Value a, Value b);
/// a b + c rounded once, in f32 (C's fmaf; one FFMA on the GPU, std::fma in
/// the CPU interpreter): exact where a b + c is representable, whatever
/// contraction the compilers choose.
Value fma(Value a, Value b, Value c);
/// e^a. On the GPU the hardware ex2 approximation of 2^(a log2 e), as
/// Triton's exp (relative error about 2^-21 + |a| 2^-24), with results below
/// 2^-126 (a < -87.3) flushed to zero; the CPU interpreter uses libm.
Value exp(Value a);
/// 2^a. On the GPU one ex2.approx.ftz (as Triton's exp2: relative error
/// about 2^-22), with results below 2^-126 flushed to zero; the CPU
/// interpreter uses libm.
Value exp2(Value a);
/// ln a. On the GPU the hardware lg2 approximation times ln 2 (absolute
/// error about 2^-22 ln 2; subnormal a keeps its finite log); the CPU
/// interpreter uses libm.
Value log(Value a);
Value abs(Value a);
Value sqrt(Value a);
Value tanh(Value a);
/// Three-way sign of a float value: -1, 0 or +1 (sign(0) = 0, as torch.sign).
Value sign(Value a);
/// cond ? a : b, elementwise (cond is i1; scalars broadcast).
Value where(Value cond, Value a, Value b);
Value where(Value cond, Value a, double b);
Value where(Value cond, double a, Value b);

/// Compile-time parameters of one build of a kernel: named integers such as
/// BLOCK_SIZE and num_warps, plus the dtype of the kernel's data.
struct Config {
  std::map<std::string, int64_t> params;
  DType dtype = DType::F32;
  int64_t get(const std::string &name) const;
  /// "BLOCK_SIZE=4096,num_warps=8,dtype=bf16" (deterministic order).
  std::string str() const;
};

/// A 2-D view of memory, as Triton's tensor descriptors: `rows` x `cols`
/// elements, element (r, c) at ptr[r * rowStride + c * colStride] (integer
/// scalars, strides in elements). A transposed matrix is the same memory
/// with rows and cols, and the strides, swapped.
struct TensorDescriptor {
  Value ptr, rows, cols, rowStride, colStride;
};

/// Builds one kernel. Arguments must be declared before they are used;
/// everything else reads like the math.
class KernelBuilder {
public:
  KernelBuilder(const std::string &kernelName, const Config &config);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder &) = delete;

  const std::string &name() const;
  const Config &config() const;
  /// Value of compile-time parameter `name` (throws if the config lacks it).
  int64_t param(const std::string &name) const;
  /// The same parameter as an i32/i64 scalar in the IR (a tile.constexpr).
  Value paramValue(const std::string &name, DType type = DType::I32,
                   SourceLoc loc = SourceLoc::here());

  Value pointerArg(const std::string &name, DType elementType);
  /// A pointer argument that may share memory with another one (e.g. a
  /// gradient written in place over the logits). Plain pointer arguments
  /// are declared non-aliasing (__restrict__), which lets the CUDA compiler
  /// reorder their loads and stores; these are not.
  Value aliasedPointerArg(const std::string &name, DType elementType);
  Value scalarArg(const std::string &name, DType type);

  Value programId(int axis = 0, SourceLoc loc = SourceLoc::here());
  Value numPrograms(int axis = 0, SourceLoc loc = SourceLoc::here());
  /// Programs per thread-block cluster: the CLUSTER_SIZE parameter, 1 when
  /// the config has none. Programs c*n .. c*n + n-1 along axis 0 form
  /// cluster c (on the GPU a CUDA cluster, sm_90 or newer).
  int64_t clusterSize() const;
  /// Adjacent elements of a tile of `tileSize` elements that one thread
  /// holds on the GPU (tile-assign-layout): 16 bytes of the narrowest type
  /// the kernel loads or stores (`narrowestAccessed`), capped by the largest
  /// power of two dividing tileSize / (32 num_warps). Rows of a column
  /// count dividing it are thread-local (sumRows). Throws on a tileSize that
  /// is not a positive multiple of the thread count.
  int64_t threadGroup(int64_t tileSize, DType narrowestAccessed) const;
  /// Promises that every load, store and copyAsync (both sides) whose lanes
  /// are adjacent elements
  /// starts each group of up to 16 bytes at an address aligned to the group's
  /// size (e.g. rows of a multiple of 16 bytes, from a cudaMalloc base, walked
  /// in tiles). The GPU code then skips the per-group alignment check and
  /// its element-by-element fallback; masks are still honoured. A broken
  /// promise is a misaligned-address fault, so set it only from what the
  /// caller has checked (the ALIGNED switch of the kernel specs).
  void assumeAlignedVectors();
  /// Online softmax, per lane: folds tile x (f32) into the running state
  /// (m, d) of the row's max and sum-exp, m' = max(m, x) and
  /// d' = d exp(m - m') + exp(x - m'); a state starts at (-inf, 0). Returns
  /// (m', d'). The compiler knows it for a per-row reduction: a row split
  /// over a cluster (SPLIT_ROWS) combines the programs' states on chip, and
  /// a state that only a walk carries to its softmaxTotal is kept per
  /// thread's group of lanes (tile-expand-softmax), one exp per element.
  std::pair<Value, Value> softmaxFold(Value m, Value d, Value x,
                                      SourceLoc loc = SourceLoc::here());
  /// A state's row max M and sum S = sum over lanes of d exp(m - M) (M = -inf:
  /// an empty row, S = 0); lse = M + log S.
  std::pair<Value, Value> softmaxTotal(Value m, Value d,
                                       SourceLoc loc = SourceLoc::here());
  enum class ClusterOp { Sum, Max, Min };
  /// Combines each scalar of `xs` (one type, f32/i32/i64; bf16/f16 widen to
  /// f32) over the programs of this program's cluster, in program order:
  /// every program gets the same bits. Every program of the cluster must
  /// reach the call (it is a barrier), so call it under uniform conditions
  /// only. Lowered to distributed shared memory on the GPU.
  std::vector<Value> clusterReduce(ClusterOp combine,
                                   const std::vector<Value> &xs,
                                   SourceLoc loc = SourceLoc::here());
  /// A new array of n elements of `type` in shared memory (on chip, private
  /// to this program), as a pointer for load and store. Its contents start
  /// undefined; a program sees its own writes after barrier() (or at once
  /// where each lane reads back the elements it wrote itself, same offsets
  /// and tile size). Call it outside loops and branches. Throws when the
  /// kernel's arrays would exceed 227 KiB; the device may allow less (the
  /// launch then fails with the CUDA error). The CPU interpreter gives each
  /// program its own NaN-filled (0xFF) copy.
  Value sharedArray(int64_t n, DType type, SourceLoc loc = SourceLoc::here());
  /// All lanes of this program meet here (__syncthreads): shared-memory
  /// writes before it are visible to every lane after it. Call it under
  /// uniform conditions only.
  void barrier(SourceLoc loc = SourceLoc::here());
  /// Starts copying src[srcOffsets] into dst[dstOffsets] without waiting:
  /// dst points into a sharedArray, src into a pointer argument (global
  /// memory). Each lane's aligned group of up to 16 adjacent bytes is one
  /// cp.async (sm_80+); misaligned or partly masked groups copy element by
  /// element at once. Lanes where `mask` is false copy nothing. The data is
  /// only there once commitCopies() has closed the copy's group and
  /// waitCopies() has retired it; neither side may be written before then.
  /// The CPU interpreter reads the source at once and writes the
  /// destination at the wait, so reading too early shows there too, and a
  /// program ending with copies in flight is an error. Copying into an
  /// array that other lanes may still be reading (a reused buffer) needs a
  /// barrier() after those reads first; the interpreter cannot see that race.
  void copyAsync(Value dst, Value dstOffsets, Value src, Value srcOffsets,
                 Mask mask = std::nullopt, SourceLoc loc = SourceLoc::here());
  /// A hint: brings ptr[offset, offset + count) (scalars, in elements)
  /// into L2 from one lane, without registers, so that loads of it soon
  /// after hit there (sm_90; nothing elsewhere). A count <= 0 fetches
  /// nothing; the range must lie inside the buffer.
  void prefetchL2(Value ptr, Value offset, Value count,
                  SourceLoc loc = SourceLoc::here());
  /// Closes the group of copyAsync() calls made since the last commit.
  void commitCopies(SourceLoc loc = SourceLoc::here());
  /// Waits until at most `pending` (0-7) committed groups are still in
  /// flight, then barrier(): every lane sees what the finished groups
  /// copied. Call it under uniform conditions only.
  void waitCopies(int64_t pending = 0, SourceLoc loc = SourceLoc::here());
  /// waitCopies without the barrier: each lane sees only what its own
  /// copies wrote. Enough where every lane reads back only the elements it
  /// copied: where the later load's offset at each tile index equals the
  /// copy's destination offset at that index, in tiles of one size (a lane
  /// owns the same indices of every tile of a size). Then it may be called
  /// under any condition. The interpreter cannot check this ownership.
  void waitOwnCopies(int64_t pending = 0, SourceLoc loc = SourceLoc::here());
  /// acc + a b: `a` holds an M x K and `b` a K x N matrix, row-major
  /// (element (i, j) of an R x C matrix is tile element i * C + j), both
  /// bf16 or both f16; `acc` and the result are M x N f32 tiles. Products
  /// are exact and sums f32, on tensor cores on the GPU (mma.sync). M and K
  /// must be multiples of 16 and N of 8.
  Value dot(Value a, Value b, Value acc, int64_t M, int64_t N, int64_t K,
            SourceLoc loc = SourceLoc::here());
  /// The R x C block of `view` at (row0, col0) as a row-major tile
  /// (element (i, j) is tile element i * C + j): elements outside the view
  /// read 0. A loop `for k in [k0, k1) step K: acc = dot(loadBlock(A, m0,
  /// k, M, K), loadBlock(B, k, n0, K, N), acc, M, N, K)` is compiled as a
  /// whole (tile-pipeline-dot): on the GPU the blocks are copied into
  /// shared memory DOT_STAGES (a compile-time parameter, default 3)
  /// iterations ahead and the accumulator stays in the tensor cores'
  /// registers. M, N and K must then be powers of two of at least 16.
  Value loadBlock(const TensorDescriptor &view, Value row0, Value col0,
                  int64_t R, int64_t C, SourceLoc loc = SourceLoc::here());
  /// The row-major R x `cols` matrix whose row i is `cols` copies of v[i]
  /// (v a tile of R elements).
  Value broadcastRows(Value v, int64_t cols, SourceLoc loc = SourceLoc::here());
  /// The i32 tile [0, 1, ..., n-1].
  Value arange(int64_t n, SourceLoc loc = SourceLoc::here());
  Value constant(double v, DType type, SourceLoc loc = SourceLoc::here());
  /// A tile of n copies of scalar `v`.
  Value full(int64_t n, Value v, SourceLoc loc = SourceLoc::here());
  /// ptr[offsets]; lanes where mask is false read `other` and touch nothing.
  /// A Mask of std::nullopt masks nothing (forTiles gives one for its whole
  /// tiles); an empty Value() as a mask is an error, as everywhere.
  Value load(Value ptr, Value offsets, SourceLoc loc = SourceLoc::here());
  Value load(Value ptr, Value offsets, Mask mask, double other,
             SourceLoc loc = SourceLoc::here());
  void store(Value ptr, Value offsets, Value value,
             SourceLoc loc = SourceLoc::here());
  void store(Value ptr, Value offsets, Value value, Mask mask,
             SourceLoc loc = SourceLoc::here());

  /// for (i = lo; i < hi; i += step) body(i). Vars assigned in the body are
  /// carried through the loop.
  void forRange(Value lo, Value hi, Value step,
                const std::function<void(Value)> &body,
                SourceLoc loc = SourceLoc::here());
  void forRange(int64_t lo, Value hi, int64_t step,
                const std::function<void(Value)> &body,
                SourceLoc loc = SourceLoc::here());
  /// Walks [lo, hi) (i32 scalars) in steps of `unroll` tiles of n lanes:
  /// body(offs, masks) gets each tile's offsets (i + u n + arange(n)) and
  /// mask. The steps wholly inside the range come first, with no masks
  /// (std::nullopt: no compare per element, loads and stores without lane
  /// checks); then the whole tiles left, one per call, also unmasked; then
  /// the one partial tile, if any, alone, with its mask offs < hi. So body
  /// gets `unroll` tiles per call in the whole steps and one in the tail.
  /// An empty or reversed range (hi <= lo) runs nothing. Vars assigned in
  /// the body are carried, as in forRange.
  void forTiles(Value lo, Value hi, int64_t n, int64_t unroll,
                const std::function<void(const std::vector<Value> &offs,
                                         const std::vector<Mask> &masks)> &body,
                SourceLoc loc = SourceLoc::here());
  /// forTiles with the whole steps walked from the end of the range back to
  /// its start (the tail still comes last, its whole tiles also from the
  /// end). A second pass over data that the first pass walked forward meets
  /// the most recently read tiles first, the ones likeliest to be still in
  /// L2.
  void forTilesBackward(
      Value lo, Value hi, int64_t n, int64_t unroll,
      const std::function<void(const std::vector<Value> &offs,
                               const std::vector<Mask> &masks)> &body,
      SourceLoc loc = SourceLoc::here());
  /// if (cond) thenBody() else elseBody(); Vars assigned in either branch
  /// hold the taken branch's value afterwards.
  void ifThen(Value cond, const std::function<void()> &thenBody,
              const std::function<void()> &elseBody = nullptr,
              SourceLoc loc = SourceLoc::here());

  /// Verifies the kernel and hands over the module (the builder is spent).
  TileModule finish();

  struct Impl;
  Impl &impl() { return *impl_; }

private:
  void walkTiles(Value lo, Value hi, int64_t n, int64_t unroll, bool backward,
                 const std::function<void(const std::vector<Value> &,
                                          const std::vector<Mask> &)> &body,
                 SourceLoc loc);
  std::unique_ptr<Impl> impl_;
};

} // namespace dsl
} // namespace tilejit

#endif // TILEJIT_DSL_H
