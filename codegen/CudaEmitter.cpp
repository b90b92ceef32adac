//===- CudaEmitter.cpp - SIMT-level MLIR to CUDA C++ ----------------------===//
//
// One KernelEmitter per kernel walks the (structured, single-block) body in
// order and prints one C statement per op. See CudaEmitter.h for the
// conventions of the emitted code.
//
//===----------------------------------------------------------------------===//
#include "tilejit/codegen/CudaEmitter.h"

#include "tilejit/Error.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

using namespace mlir;

namespace tilejit {

namespace {

const char *const kPrelude = R"(// ---- tilejit prelude ----
// The bf16/f16 storage types and the conversions the kernels use, under
// cuda_bf16.h's names and with its layout (2-byte structs of raw bits).
// Parsing cuda_bf16.h and cuda_fp16.h took NVRTC's front end 25-30 ms per
// kernel (56 of its 180 ms for a small one, against 31 without them), and
// nothing else in them is used: all bf16/f16 arithmetic goes through float.
struct __align__(2) __nv_bfloat16 { unsigned short __x; };
struct __align__(2) __half { unsigned short __x; };
__device__ __forceinline__ float __bfloat162float(__nv_bfloat16 h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  float f;
  asm("cvt.f32.bf16 %0, %1;" : "=f"(f) : "h"(h.__x));
  return f;
#else
  return __uint_as_float(unsigned(h.__x) << 16);
#endif
}
__device__ __forceinline__ float __half2float(__half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.__x));
  return f;
}
__device__ __forceinline__ __half __float2half_rn(float f) {
  __half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.__x) : "f"(f));
  return h;
}
__device__ __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f) {
  __nv_bfloat16 h;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.__x) : "f"(f));
#else // round to nearest even by hand; NaN stays a (quiet) NaN
  unsigned u = __float_as_uint(f);
  h.__x = (u & 0x7fffffffu) > 0x7f800000u
              ? (unsigned short)((u >> 16) | 0x40u)
              : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
  return h;
}
// Integers to f16/bf16 in one rounding (through float they would round
// twice). bf16 has the instruction from sm_90; before, the integer is
// truncated to float with a sticky low bit (round to odd), after which one
// rounding to bf16 is exact: float keeps more than bf16's 8 bits plus two.
#define TJ_INT_TO_HALF(NAME, T, PTX, REG)                                      \
  __device__ __forceinline__ __half NAME(T i) {                                \
    __half h;                                                                  \
    asm("cvt.rn.f16." PTX " %0, %1;" : "=h"(h.__x) : REG(i));                  \
    return h;                                                                  \
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TJ_INT_TO_BF16(NAME, T, PTX, REG, RZ)                                  \
  __device__ __forceinline__ __nv_bfloat16 NAME(T i) {                         \
    __nv_bfloat16 h;                                                           \
    asm("cvt.rn.bf16." PTX " %0, %1;" : "=h"(h.__x) : REG(i));                 \
    return h;                                                                  \
  }
#else
#define TJ_INT_TO_BF16(NAME, T, PTX, REG, RZ)                                  \
  __device__ __forceinline__ __nv_bfloat16 NAME(T i) {                         \
    float f = RZ(i);                                                           \
    if ((T)f != i)                                                             \
      f = __uint_as_float(__float_as_uint(f) | 1u);                            \
    return __float2bfloat16_rn(f);                                             \
  }
#endif
TJ_INT_TO_HALF(__int2half_rn, int, "s32", "r")
TJ_INT_TO_HALF(__uint2half_rn, unsigned, "u32", "r")
TJ_INT_TO_HALF(__ll2half_rn, long long, "s64", "l")
TJ_INT_TO_HALF(__ull2half_rn, unsigned long long, "u64", "l")
TJ_INT_TO_BF16(__int2bfloat16_rn, int, "s32", "r", __int2float_rz)
TJ_INT_TO_BF16(__uint2bfloat16_rn, unsigned, "u32", "r", __uint2float_rz)
TJ_INT_TO_BF16(__ll2bfloat16_rn, long long, "s64", "l", __ll2float_rz)
TJ_INT_TO_BF16(__ull2bfloat16_rn, unsigned long long, "u64", "l", __ull2float_rz)

// arith.maximumf / arith.minimumf: NaN propagates, and -0 < +0. From
// sm_80 that is one instruction, max.NaN / min.NaN (FMNMX orders +0 above
// -0); before, five compares and selects.
__device__ __forceinline__ float tj_maximumf(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a)
    return a;
  if (b != b)
    return b;
  if (a == b) // equal, or +0 vs -0: the sign bit is set only if both have it
    return __int_as_float(__float_as_int(a) & __float_as_int(b));
  return a > b ? a : b;
#endif
}
// e^x on the hardware ex2 unit, flushing results below 2^-126 to zero:
// ex2.approx.ftz is one MUFU op, where __expf without -ftz adds a range
// check and two rescaling multiplies around it.
__device__ __forceinline__ float tj_fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float tj_fast_exp(float x) {
  return tj_fast_exp2(x * 1.4426950408889634f);
}
__device__ __forceinline__ float tj_minimumf(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a)
    return a;
  if (b != b)
    return b;
  if (a == b)
    return __int_as_float(__float_as_int(a) | __float_as_int(b));
  return a < b ? a : b;
#endif
}

// Combiners of the block-wide reductions (float max/min as tj_maximumf/...).
struct tj_sum_op {
  template <typename T>
  __device__ __forceinline__ static T apply(T a, T b) { return a + b; }
};
struct tj_max_op {
  __device__ __forceinline__ static float apply(float a, float b) { return tj_maximumf(a, b); }
  __device__ __forceinline__ static int apply(int a, int b) { return a > b ? a : b; }
  __device__ __forceinline__ static long long apply(long long a, long long b) { return a > b ? a : b; }
};
struct tj_min_op {
  __device__ __forceinline__ static float apply(float a, float b) { return tj_minimumf(a, b); }
  __device__ __forceinline__ static int apply(int a, int b) { return a < b ? a : b; }
  __device__ __forceinline__ static long long apply(long long a, long long b) { return a < b ? a : b; }
};

// Reduces one value per thread over a block of P threads (blockDim.x == P):
// butterfly over the 32 lanes of each warp, then, with several warps, lane 0
// of each warp publishes its partial in shared memory and every thread
// combines the P/32 partials in the same order. All threads get the result;
// all threads must call it. The second barrier lets the next call reuse the
// shared slots.
template <int P, typename Op, typename T>
__device__ __forceinline__ T tj_block_reduce(T x) {
  static_assert(P >= 32 && P <= 1024 && P % 32 == 0,
                "P must be a multiple of 32 in [32, 1024]");
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    x = Op::apply(x, __shfl_xor_sync(0xffffffffu, x, offset));
  if constexpr (P > 32) {
    __shared__ T tj_partials[32];
    if (threadIdx.x % 32 == 0)
      tj_partials[threadIdx.x / 32] = x;
    __syncthreads();
    x = tj_partials[0];
#pragma unroll
    for (int w = 1; w < P / 32; ++w)
      x = Op::apply(x, tj_partials[w]);
    __syncthreads();
  }
  return x;
}
template <int P, typename T>
__device__ __forceinline__ T tj_block_sum(T x) { return tj_block_reduce<P, tj_sum_op>(x); }
template <int P, typename T>
__device__ __forceinline__ T tj_block_max(T x) { return tj_block_reduce<P, tj_max_op>(x); }
template <int P, typename T>
__device__ __forceinline__ T tj_block_min(T x) { return tj_block_reduce<P, tj_min_op>(x); }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The shared::cluster address of shared::cta address `addr` in the block
// of rank `rank` in this cluster.
__device__ __forceinline__ unsigned tj_mapa(unsigned addr, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}
// Waits once at the cluster barrier of tj_cluster_mbarriers_init.
__device__ __forceinline__ void tj_cluster_init_wait(bool &waited) {
  if (!waited)
    asm volatile("barrier.cluster.wait;" ::: "memory");
  waited = true;
}
// Thread 0 pushes the block's values v[0..N) into slot row `rank` of
// `slots` in every block of the cluster with st.async, each store
// completing its bytes on that block's mbarrier `bar`.
template <int C, int N, typename T>
__device__ __forceinline__ void tj_cluster_push(T *slots,
                                                unsigned long long *bar,
                                                const T (&v)[N]) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte values");
  if (threadIdx.x != 0)
    return;
  unsigned barAddr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :: "r"(barAddr), "r"(unsigned(C * N * sizeof(T))) : "memory");
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  unsigned row = static_cast<unsigned>(
      __cvta_generic_to_shared(slots + rank * N));
#pragma unroll
  for (unsigned r = 0; r < C; ++r) {
    unsigned remoteBar = tj_mapa(barAddr, r), remoteRow = tj_mapa(row, r);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (sizeof(T) == 4) {
        unsigned bits;
        memcpy(&bits, &v[i], 4);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes"
                     ".b32 [%0], %1, [%2];"
                     :: "r"(remoteRow + 4 * i), "r"(bits), "r"(remoteBar)
                     : "memory");
      } else {
        unsigned long long bits;
        memcpy(&bits, &v[i], 8);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes"
                     ".b64 [%0], %1, [%2];"
                     :: "r"(remoteRow + 8 * i), "l"(bits), "r"(remoteBar)
                     : "memory");
      }
    }
  }
}
// Every thread waits until the phase of parity `parity` of its block's
// mbarrier `bar` completed (all C rows arrived), then combines the rows of
// `slots` in rank order, so every block gets the same bits.
template <int C, typename Op, int N, typename T>
__device__ __forceinline__ void tj_cluster_combine(const T *slots,
                                                   unsigned long long *bar,
                                                   unsigned parity,
                                                   T (&v)[N]) {
  unsigned barAddr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  unsigned done;
  do {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 "
                 "p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(barAddr), "r"(parity) : "memory");
  } while (!done);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    T acc = slots[i];
#pragma unroll
    for (int r = 1; r < C; ++r)
      acc = Op::apply(acc, slots[r * N + i]);
    v[i] = acc;
  }
}
// Combines v[0..N) (uniform in each block) over the C blocks of the
// cluster, for a tile.cluster_reduce that runs at most once per kernel (not
// in a loop), without a cluster barrier: a push into every block, then a
// wait on this block's mbarrier `bar` (phase 0). No release fence waits for
// this block's outstanding memory operations, and no block reads another's
// shared memory, so none waits for its peers before exiting (a block
// receives every push into it before its wait completes). `bar` was
// initialized by tj_cluster_mbarriers_init; the first combine waits for
// every block to have done that (`initWaited`).
template <int C, typename Op, int N, typename T>
__device__ __forceinline__ void tj_cluster_reduce_once(T *slots,
                                                      unsigned long long *bar,
                                                      bool &initWaited,
                                                      T (&v)[N]) {
  tj_cluster_init_wait(initWaited);
  tj_cluster_push<C>(slots, bar, v);
  tj_cluster_combine<C, Op>(slots, bar, 0, v);
}
// The same combine for a tile.cluster_reduce in a loop: its k-th run
// (`runs`, counted per op) uses slot buffer k % 2 of `slots` (2 C N values)
// and mbarrier bars[k % 2], whose phase (k / 2) % 2 it waits for. The block
// barrier before the push keeps a peer from pushing run k + 2 into buffer
// k % 2 while a warp of this block still reads run k there: the peer pushes
// run k + 2 only after its wait for run k + 1, which needs this block's push
// of run k + 1, which comes after that barrier. For the same reason no
// bytes of run k + 2 reach bars[k % 2] before its phase of run k completed.
template <int C, typename Op, int N, typename T>
__device__ __forceinline__ void tj_cluster_reduce_loop(T *slots,
                                                      unsigned long long *bars,
                                                      unsigned &runs,
                                                      bool &initWaited,
                                                      T (&v)[N]) {
  tj_cluster_init_wait(initWaited);
  unsigned k = runs++, b = k & 1;
  __syncthreads();
  tj_cluster_push<C>(slots + b * C * N, bars + b, v);
  tj_cluster_combine<C, Op>(slots + b * C * N, bars + b, (k >> 1) & 1, v);
}
// Thread 0 initializes the K mbarriers of tj_cluster_reduce_once and
// tj_cluster_reduce_loop (one arrival each) and every thread arrives at a
// cluster barrier, whose wait (tj_cluster_init_wait, before the first store
// to a peer, or at the end for a block that made none) makes them visible
// to every block. The loads before the first combine run meanwhile.
template <int K>
__device__ __forceinline__ void tj_cluster_mbarriers_init(unsigned long long *bars) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;"
                   :: "r"(static_cast<unsigned>(__cvta_generic_to_shared(bars + k)))
                   : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
#endif

// Element e of a bf16 array as f32, from the 32-bit word holding it and
// its neighbour: a shift for the low half, a mask for the high one (one
// instruction each, where __bfloat162float of the extracted high half
// takes two). The array has an even length.
__device__ __forceinline__ float tj_bf16_at(const __nv_bfloat16 *x, int e) {
  unsigned w;
  memcpy(&w, x + (e & ~1), 4);
  return __uint_as_float(e & 1 ? w & 0xffff0000u : w << 16);
}

// tile.dot: element e of a thread's part of a tile is tile element
// (e / VEC) * P * VEC + threadIdx.x * VEC + e % VEC (tile-assign-layout).
template <int P, int VEC>
__device__ __forceinline__ int tj_tile_index(int e) {
  return (e / VEC) * P * VEC + int(threadIdx.x) * VEC + e % VEC;
}
template <typename T> struct tj_is_bf16 { static constexpr bool value = false; };
template <> struct tj_is_bf16<__nv_bfloat16> { static constexpr bool value = true; };
template <typename T>
__device__ __forceinline__ unsigned tj_pack2(T lo, T hi) {
  unsigned short l, h;
  memcpy(&l, &lo, 2);
  memcpy(&h, &hi, 2);
  return unsigned(l) | (unsigned(h) << 16);
}
// out = acc + a b for row-major a (M x K), b (K x N), acc (M x N), each
// given as this thread's elements. The tiles are staged in shared memory;
// each warp computes 16 x 8 blocks of the result with mma.sync m16n8k16
// (fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16"). All
// threads of the block must call it.
template <int M, int N, int K, int P, int VA, int VB, int VC, typename T>
__device__ void tj_dot(const T *a, const T *b, const float *acc, float *out) {
  static_assert(M % 16 == 0 && K % 16 == 0 && N % 8 == 0, "mma shape");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  static_assert(M < 0, "tile.dot needs sm_80 or newer: mma.sync m16n8k16");
#endif
  __shared__ T sa[M * K];
  __shared__ T sb[K * N];
  __shared__ float sc[M * N];
  for (int e = 0; e < M * K / P; ++e)
    sa[tj_tile_index<P, VA>(e)] = a[e];
  for (int e = 0; e < K * N / P; ++e)
    sb[tj_tile_index<P, VB>(e)] = b[e];
  for (int e = 0; e < M * N / P; ++e)
    sc[tj_tile_index<P, VC>(e)] = acc[e];
  __syncthreads();
  const int lane = threadIdx.x % 32, group = lane / 4, pair = lane % 4 * 2;
  for (int blk = threadIdx.x / 32; blk < (M / 16) * (N / 8); blk += P / 32) {
    const int m0 = blk / (N / 8) * 16, n0 = blk % (N / 8) * 8;
    float c[4];
    for (int i = 0; i < 4; ++i)
      c[i] = sc[(m0 + group + i / 2 * 8) * N + n0 + pair + i % 2];
    for (int k0 = 0; k0 < K; k0 += 16) {
      unsigned ra[4], rb[2];
      for (int r = 0; r < 4; ++r) { // a_{2r}, a_{2r+1}
        const T *p = sa + (m0 + group + r % 2 * 8) * K + k0 + pair + r / 2 * 8;
        ra[r] = tj_pack2(p[0], p[1]);
      }
      for (int r = 0; r < 2; ++r) { // b_{2r}, b_{2r+1}
        const T *p = sb + (k0 + pair + r * 8) * N + n0 + group;
        rb[r] = tj_pack2(p[0], p[N]);
      }
      if constexpr (tj_is_bf16<T>::value)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]),
                       "r"(rb[0]), "r"(rb[1]));
      else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]),
                       "r"(rb[0]), "r"(rb[1]));
    }
    for (int i = 0; i < 4; ++i)
      sc[(m0 + group + i / 2 * 8) * N + n0 + pair + i % 2] = c[i];
  }
  __syncthreads();
  for (int e = 0; e < M * N / P; ++e)
    out[e] = sc[tj_tile_index<P, VC>(e)];
  __syncthreads();
}

// tile.reduce_rows / tile.broadcast_rows: the tile goes through shared
// memory (one buffer per size and type, shared by all such ops).
template <int N, typename T> __device__ __forceinline__ T *tj_rows_buffer() {
  __shared__ T buf[N];
  return buf;
}
// dst = the R row reductions (in column order) of the R x C matrix src.
template <int R, int C, int P, int VS, int VR, typename Op, typename T>
__device__ void tj_reduce_rows(const T *src, T *dst) {
  T *buf = tj_rows_buffer<R * C, T>();
  for (int e = 0; e < R * C / P; ++e)
    buf[tj_tile_index<P, VS>(e)] = src[e];
  __syncthreads();
  for (int e = 0; e < R / P; ++e) {
    const T *row = buf + tj_tile_index<P, VR>(e) * C;
    T acc = row[0];
    for (int j = 1; j < C; ++j)
      acc = Op::apply(acc, row[j]);
    dst[e] = acc;
  }
  __syncthreads();
}
// dst = the R x C matrix whose row i is C copies of src[i].
template <int R, int C, int P, int VS, int VR, typename T>
__device__ void tj_broadcast_rows(const T *src, T *dst) {
  T *buf = tj_rows_buffer<R, T>();
  for (int e = 0; e < R / P; ++e)
    buf[tj_tile_index<P, VR>(e)] = src[e];
  __syncthreads();
  for (int e = 0; e < R * C / P; ++e)
    dst[e] = buf[tj_tile_index<P, VS>(e) / C];
  __syncthreads();
}

// One 4/8/16-byte access of adjacent elements (the caller checked alignment).
template <int Bytes> struct tj_bits;
template <> struct tj_bits<4> { typedef unsigned int type; };
template <> struct tj_bits<8> { typedef uint2 type; };
template <> struct tj_bits<16> { typedef uint4 type; };
template <int Bytes, typename T>
__device__ __forceinline__ void tj_vload(T *dst, const T *src) {
  typename tj_bits<Bytes>::type bits =
      *reinterpret_cast<const typename tj_bits<Bytes>::type *>(src);
  memcpy(dst, &bits, Bytes);
}
template <int Bytes, typename T>
__device__ __forceinline__ void tj_vstore(T *dst, const T *src) {
  typename tj_bits<Bytes>::type bits;
  memcpy(&bits, src, Bytes);
  *reinterpret_cast<typename tj_bits<Bytes>::type *>(dst) = bits;
}
// tile.copy_async: one group of 4, 8 or 16 bytes from global to shared
// memory without waiting (cp.async, sm_80+; a plain copy before that).
template <int BYTES, typename T>
__device__ __forceinline__ void tj_copy_async(T *dst, const T *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d),
                 "l"(src), "n"(BYTES)
                 : "memory");
#else
  tj_vstore<BYTES>(dst, src);
#endif
}
// tile.prefetch_l2: the whole 16-byte units of [p, p + n) into L2.
template <typename T>
__device__ __forceinline__ void tj_prefetch_l2(const T *p, long long n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned long long lo = (reinterpret_cast<unsigned long long>(p) + 15) & ~15ull;
  unsigned long long hi =
      reinterpret_cast<unsigned long long>(p + (n > 0 ? n : 0)) & ~15ull;
  if (hi > lo) // at most 4 GiB - 16 at once: the size is 32 bits
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
                 :: "l"(lo), "r"(static_cast<unsigned>(
                        hi - lo < 0xfffffff0ull ? hi - lo : 0xfffffff0ull))
                 : "memory");
#endif
}
__device__ __forceinline__ void tj_copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int PENDING> __device__ __forceinline__ void tj_copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
#endif
}
// ---- end of tilejit prelude ----
)";

// tile.dot_loop's CUDA C++ (codegen/cuda/), printed where a kernel has one.
const char *const kDotLoop[] = {
#include "DotLoopMma.cuh.inc"
    ,
#include "DotLoopWgmma.cuh.inc"
    ,
#include "DotLoopWgmmaWs.cuh.inc"
    ,
#include "DotLoop.cuh.inc"
};

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

/// A cluster_reduce outside loops: tj_cluster_reduce_once, on one mbarrier
/// (in a loop: tj_cluster_reduce_loop, on two).
bool runsOnce(tile::ClusterReduceOp op) {
  return !op->getParentOfType<LoopLikeOpInterface>();
}

/// The prelude's combiner struct of a reduction.
const char *combinerName(ReduceKind kind) {
  return kind == ReduceKind::Sum   ? "tj_sum_op"
         : kind == ReduceKind::Max ? "tj_max_op"
                                   : "tj_min_op";
}

std::string floatLiteral(float f) {
  char buf[48];
  if (std::isnan(f) || std::isinf(f)) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08xu)", bits);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.9g", f); // round-trips every float
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s + "f";
}

std::string int32Literal(int64_t v) {
  if (v == INT32_MIN)
    return "(-2147483647 - 1)";
  return std::to_string(v);
}

std::string int64Literal(int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

bool isIdentifier(StringRef s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

std::string escapeForString(StringRef s) {
  std::string r;
  for (char c : s) {
    if (c == '\\' || c == '"')
      r += '\\';
    if (c == '\n')
      continue;
    r += c;
  }
  return r;
}

//===----------------------------------------------------------------------===//
// KernelEmitter
//===----------------------------------------------------------------------===//

using ElemExpr = std::function<std::string(const std::string &e)>;

class KernelEmitter {
public:
  KernelEmitter(std::string &out, func::FuncOp func) : out(out), func(func) {}

  void emit();

private:
  std::string &out;
  func::FuncOp func;
  std::string kernelName;
  int64_t threads = 0;
  int64_t clusterSize = 1;
  bool alignedVectors = false; // attr::kAlignedVectors: no alignment checks
  unsigned clusterOps = 0;     // tile.cluster_reduce ops printed so far
  // Each tile.cluster_reduce's first mbarrier in tj_cluster_bar: one per op
  // outside loops (tj_cluster_reduce_once), two per op in a loop
  // (tj_cluster_reduce_loop, which also counts its runs in a variable).
  llvm::DenseMap<Operation *, unsigned> clusterBarOf;
  unsigned clusterMbarriers = 0;
  int indent = 0;
  unsigned nextId = 0;
  llvm::DenseMap<Value, std::string> names;
  // #line tracking: the file and line the compiler assumes for the next
  // physical line; presumedLine < 0 until the first directive.
  std::string curFile;
  int64_t presumedLine = -1;
  std::string pendingFile; // empty: no location pending
  int64_t pendingLine = 0;

  //--- errors ---------------------------------------------------------------
  [[noreturn]] void fail(Operation *op, const Twine &why) const {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << "emitCuda: kernel '" << kernelName << "'";
    if (op) {
      os << ": cannot print '" << op->getName().getStringRef() << "'";
      if (auto loc = fileLoc(op->getLoc()))
        os << " at " << loc->getFilename().getValue() << ":" << loc->getLine()
           << ":" << loc->getColumn();
    }
    os << ": " << why.str();
    throw Error(msg);
  }

  //--- output ---------------------------------------------------------------
  void line(const std::string &text) {
    out.append(2 * indent, ' ');
    out += text;
    out += '\n';
    if (presumedLine >= 0)
      ++presumedLine;
  }

  static std::optional<FileLineColLoc> fileLoc(Location loc) {
    std::optional<FileLineColLoc> found;
    loc->walk([&](Location l) {
      if (auto f = dyn_cast<FileLineColLoc>(l)) {
        found = f;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return found;
  }

  /// Makes `op`'s source line the pending location: the next stmt() (the
  /// op's main statement, e.g. the body of an element loop) is preceded by a
  /// `#line` directive unless the compiler would already assume that line.
  void locate(Operation *op) {
    pendingFile.clear();
    auto loc = fileLoc(op->getLoc());
    // "-" is what the parser calls an unnamed buffer: not worth a directive.
    if (!loc || loc->getLine() == 0 || loc->getFilename().getValue().empty() ||
        loc->getFilename().getValue() == "-")
      return;
    pendingFile = loc->getFilename().getValue().str();
    pendingLine = loc->getLine();
  }

  /// A line that holds the current op's main statement.
  void stmt(const std::string &text) {
    if (!pendingFile.empty()) {
      // The file name is repeated only when it changes.
      if (pendingFile != curFile) {
        out += "#line " + std::to_string(pendingLine) + " \"" +
               escapeForString(pendingFile) + "\"\n";
      } else if (presumedLine != pendingLine) {
        out += "#line " + std::to_string(pendingLine) + "\n";
      }
      curFile = pendingFile;
      presumedLine = pendingLine;
      pendingFile.clear();
    }
    line(text);
  }

  //--- values and types -----------------------------------------------------
  std::string freshName() { return "v" + std::to_string(nextId++); }

  std::string bind(Value v) {
    std::string n = freshName();
    names[v] = n;
    return n;
  }
  void bindAs(Value v, std::string name) { names[v] = std::move(name); }

  /// A copy, not a reference into `names`: a later bind() may grow the map
  /// and move its strings (a reference then dangled in declareCopy).
  std::string name(Value v, Operation *user) const {
    auto it = names.find(v);
    if (it == names.end())
      fail(user, "operand has no C variable (defined in an unsupported way)");
    return it->second;
  }

  /// The C type of a scalar (element) type.
  std::string scalarType(Type t, Operation *op) const {
    if (t.isInteger(1))
      return "bool";
    if (t.isInteger(32))
      return "int";
    if (t.isInteger(64) || t.isIndex())
      return "long long";
    if (t.isF32())
      return "float";
    if (t.isF16())
      return "__half";
    if (t.isBF16())
      return "__nv_bfloat16";
    if (auto ptr = dyn_cast<tile::PtrType>(t))
      return scalarType(ptr.getElementType(), op) + " *";
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "unsupported type " << t;
    fail(op, s);
  }

  /// K for vector<K x T>, nullopt for scalars.
  std::optional<int64_t> vecLen(Type t, Operation *op) const {
    auto vt = dyn_cast<VectorType>(t);
    if (!vt)
      return std::nullopt;
    if (vt.getRank() != 1 || vt.isScalable())
      fail(op, "only fixed 1-D vectors are supported");
    return vt.getNumElements();
  }

  static Type elemType(Type t) {
    if (auto vt = dyn_cast<VectorType>(t))
      return vt.getElementType();
    return t;
  }

  /// `T vN` or `T vN[K]` (pointers: `T *vN`).
  std::string declaration(Type t, const std::string &n, Operation *op) const {
    std::string ct = scalarType(elemType(t), op);
    std::string sep = ct.back() == '*' ? "" : " ";
    if (auto k = vecLen(t, op))
      return ct + sep + n + "[" + std::to_string(*k) + "]";
    return ct + sep + n;
  }

  /// `vN[e]` for a vector, `vN` for a scalar.
  std::string ref(Value v, const std::string &e, Operation *user) const {
    const std::string &n = name(v, user);
    if (isa<VectorType>(v.getType()))
      return n + "[" + e + "]";
    return n;
  }

  //--- float helpers (bf16/f16 math goes through float) ----------------------
  static std::string toF32(const std::string &x, Type t) {
    if (t.isBF16())
      return "__bfloat162float(" + x + ")";
    if (t.isF16())
      return "__half2float(" + x + ")";
    return x;
  }
  static std::string fromF32(const std::string &x, Type t) {
    if (t.isBF16())
      return "__float2bfloat16_rn(" + x + ")";
    if (t.isF16())
      return "__float2half_rn(" + x + ")";
    return x;
  }
  void requireFloat(Type t, Operation *op) const {
    if (!(t.isF32() || t.isF16() || t.isBF16()))
      fail(op, "only f32, f16 and bf16 floats are supported");
  }
  std::string unsignedType(Type t, Operation *op) const {
    if (t.isInteger(32))
      return "unsigned";
    if (t.isInteger(64) || t.isIndex())
      return "unsigned long long";
    if (t.isInteger(1))
      return "unsigned";
    fail(op, "unsupported integer type");
  }

  std::string zeroOf(Type t, Operation *op) const {
    if (t.isInteger(1))
      return "false";
    if (t.isInteger(32))
      return "0";
    if (t.isInteger(64) || t.isIndex())
      return "0LL";
    if (t.isF32() || t.isF16() || t.isBF16())
      return fromF32("0.0f", t);
    fail(op, "no zero value for this type");
  }

  std::string literal(Attribute a, Type t, Operation *op) const {
    if (auto ia = dyn_cast<IntegerAttr>(a)) {
      const APInt &v = ia.getValue();
      if (t.isInteger(1))
        return v.isZero() ? "false" : "true";
      if (t.isInteger(32))
        return int32Literal(v.getSExtValue());
      if (t.isInteger(64) || t.isIndex())
        return int64Literal(v.getSExtValue());
    }
    if (auto fa = dyn_cast<FloatAttr>(a))
      return floatConstant(fa.getValue(), t, op);
    fail(op, "unsupported constant");
  }
  std::string floatConstant(APFloat v, Type t, Operation *op) const {
    requireFloat(t, op);
    bool lostInfo = false;
    // f16/bf16 -> f32 is exact.
    v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lostInfo);
    return fromF32(floatLiteral(v.convertToFloat()), t);
  }

  //--- statements -------------------------------------------------------------
  /// Runs body(e) for each element index: an unrolled loop over `e`.
  void forEach(int64_t k,
               const std::function<void(const std::string &)> &body) {
    if (k == 1) {
      body("0");
      return;
    }
    line("#pragma unroll");
    line("for (int e = 0; e < " + std::to_string(k) + "; ++e)");
    ++indent;
    body("e");
    --indent;
  }

  /// The `vec` group width simt-vectorize-access put on a load or store.
  static int64_t accessWidth(Operation *op) {
    auto w = op->getAttrOfType<IntegerAttr>(attr::kAccessVec);
    return w ? w.getInt() : 1;
  }

  /// Loops over the groups of `width` adjacent elements of a vector access.
  /// A group is one vector access (vectorAccess(address, bytes)) when its
  /// address is aligned (checked at run time unless the kernel promised it)
  /// and its mask all true; otherwise each element goes through element(e).
  /// `tj_g` is the group's first element. A copy passes its destination as
  /// `ptr2`/`offsets2`: both addresses must then be aligned.
  void forEachGroup(
      Operation *op, Value ptr, Value offsets, Value mask, Type elem,
      int64_t width,
      const std::function<std::string(const std::string &, const std::string &)>
          &vectorAccess,
      const std::function<std::string(const std::string &)> &element,
      Value ptr2 = {}, Value offsets2 = {}) {
    int64_t k = *vecLen(offsets.getType(), op);
    std::string w = std::to_string(width);
    std::string bytes = std::to_string(width * elemBytes(elem, op));
    line("#pragma unroll");
    line("for (int tj_g = 0; tj_g < " + std::to_string(k) + "; tj_g += " + w +
         ") {");
    ++indent;
    std::string addr = name(ptr, op) + " + " + ref(offsets, "tj_g", op);
    auto aligned = [&](const std::string &a) {
      return "(reinterpret_cast<unsigned long long>(" + a + ") % " + bytes +
             ") == 0";
    };
    std::string check = "true";
    if (!alignedVectors) {
      check = aligned(addr);
      if (ptr2)
        check += " && " +
                 aligned(name(ptr2, op) + " + " + ref(offsets2, "tj_g", op));
    }
    stmt("bool tj_full = " + check + ";");
    if (mask) {
      line("#pragma unroll");
      line("for (int tj_j = 0; tj_j < " + w + "; ++tj_j)");
      ++indent;
      stmt("tj_full = tj_full && " + ref(mask, "tj_g + tj_j", op) + ";");
      --indent;
    }
    stmt("if (tj_full) {");
    ++indent;
    stmt(vectorAccess(addr, bytes));
    --indent;
    line("} else {");
    ++indent;
    line("#pragma unroll");
    line("for (int tj_j = 0; tj_j < " + w + "; ++tj_j)");
    ++indent;
    stmt(element("tj_g + tj_j"));
    indent -= 2;
    line("}");
    --indent;
    line("}");
  }

  int64_t elemBytes(Type t, Operation *op) const {
    if (t.isInteger(1))
      fail(op, "vector access of i1 is not supported");
    return t.getIntOrFloatBitWidth() / 8;
  }

  /// Defines `result` element-wise from expr(e).
  void define(Operation *op, Value result, const ElemExpr &expr) {
    std::string n = bind(result);
    if (auto k = vecLen(result.getType(), op)) {
      line(declaration(result.getType(), n, op) + ";");
      forEach(*k, [&](const std::string &e) {
        stmt(n + "[" + e + "] = " + expr(e) + ";");
      });
      return;
    }
    stmt(declaration(result.getType(), n, op) + " = " + expr("") + ";");
  }

  /// dst = src (arrays element-wise).
  void assign(Operation *op, Type t, const std::string &dst,
              const std::string &src) {
    if (auto k = vecLen(t, op)) {
      forEach(*k, [&](const std::string &e) {
        stmt(dst + "[" + e + "] = " + src + "[" + e + "];");
      });
      return;
    }
    stmt(dst + " = " + src + ";");
  }

  /// Declares a variable for `v` initialized from `src` (a C variable name).
  void declareCopy(Operation *op, Value v, const std::string &src) {
    std::string n = bind(v);
    if (vecLen(v.getType(), op)) {
      line(declaration(v.getType(), n, op) + ";");
      assign(op, v.getType(), n, src);
      return;
    }
    stmt(declaration(v.getType(), n, op) + " = " + src + ";");
  }

  /// Parallel assignment targets[i] = sources[i] (scf.yield).
  void yieldTo(Operation *yield, ArrayRef<std::string> targets,
               ArrayRef<Value> targetValues) {
    locate(yield);
    auto sources = yield->getOperands();
    if (sources.size() != targets.size())
      fail(yield, "yields the wrong number of values");
    // A source that is itself a target (e.g. a loop-carried value yielded in
    // another position) could be overwritten before it is read: copy all
    // sources to temporaries first in that case.
    bool clash = false;
    for (auto [j, src] : llvm::enumerate(sources))
      for (auto [i, tv] : llvm::enumerate(targetValues))
        if (i != j && src == tv)
          clash = true;
    std::vector<std::string> from;
    for (Value src : sources) {
      const std::string &s = name(src, yield);
      if (!clash) {
        from.push_back(s);
        continue;
      }
      std::string tmp = freshName();
      stmt(declaration(src.getType(), tmp, yield) +
           (vecLen(src.getType(), yield) ? ";" : " = " + s + ";"));
      if (vecLen(src.getType(), yield))
        assign(yield, src.getType(), tmp, s);
      from.push_back(tmp);
    }
    for (auto [i, src] : llvm::enumerate(sources))
      if (from[i] != targets[i])
        assign(yield, src.getType(), targets[i], from[i]);
  }

  //--- ops --------------------------------------------------------------------
  void emitBlock(Block &block, ArrayRef<std::string> yieldTargets,
                 ArrayRef<Value> yieldTargetValues);
  void emitOp(Operation *op);
  void emitFor(scf::ForOp op);
  void emitIf(scf::IfOp op);
  void emitConstant(arith::ConstantOp op);
  bool emitArith(Operation *op);
  bool emitMath(Operation *op);
  bool emitVector(Operation *op);
  bool emitSimt(Operation *op);
  void emitClusterReduce(tile::ClusterReduceOp op);

  std::string r(Operation *op, unsigned i, const std::string &e) const {
    return ref(op->getOperand(i), e, op);
  }
};

void KernelEmitter::emit() {
  kernelName = func.getSymName().str();
  if (!isIdentifier(kernelName))
    fail(nullptr, "the kernel name is not a C identifier");
  auto threadsAttr = func->getAttrOfType<IntegerAttr>(attr::kThreads);
  if (!threadsAttr)
    fail(nullptr, std::string("missing '") + attr::kThreads +
                      "' (run tile-assign-layout and tile-lower-to-simt)");
  threads = threadsAttr.getInt();
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    fail(nullptr, "simt.threads = " + std::to_string(threads) +
                      " is not a multiple of 32 in [32, 1024]");
  if (func.getFunctionType().getNumResults() != 0)
    fail(nullptr, "a kernel must not return values");
  if (func.isExternal() || !func.getBody().hasOneBlock())
    fail(nullptr, "the kernel body must be a single block");

  if (auto c = func->getAttrOfType<IntegerAttr>(attr::kClusterSize))
    clusterSize = c.getInt();
  alignedVectors = func->hasAttr(attr::kAlignedVectors);
  std::string p = std::to_string(threads);
  line("// tilejit: " + kernelName + ", " + p + " threads");
  std::string attrs = "__launch_bounds__(" + p;
  if (auto m = func->getAttrOfType<IntegerAttr>(attr::kMinProgramsPerSm);
      m && m.getInt() > 0)
    attrs += ", " + std::to_string(m.getInt());
  attrs += ")";
  if (clusterSize > 1) {
    line("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900");
    line("#error \"" + kernelName +
         " uses thread-block clusters: compile for sm_90 or newer\"");
    line("#endif");
    attrs += " __cluster_dims__(" + std::to_string(clusterSize) + ", 1, 1)";
  }
  line("extern \"C\" __global__ void " + attrs);
  Block &body = func.getBody().front();
  std::vector<std::string> params;
  for (BlockArgument arg : body.getArguments()) {
    Type t = arg.getType();
    std::string n = bind(arg);
    if (isa<VectorType>(t))
      fail(nullptr,
           "argument " + std::to_string(arg.getArgNumber()) + " is a vector");
    std::string ct = scalarType(t, func);
    bool mayAlias =
        func.getArgAttr(arg.getArgNumber(), attr::kMayAlias) != nullptr;
    if (isa<tile::PtrType>(t) && !mayAlias)
      params.push_back(ct + "__restrict__ " + n);
    else
      params.push_back(ct + " " + n);
  }
  std::string head = kernelName + "(";
  if (params.empty()) {
    line(head + ") {");
  } else if (params.size() <= 3) {
    line(head + llvm::join(params, ", ") + ") {");
  } else {
    std::string pad(head.size(), ' ');
    for (size_t i = 0; i < params.size(); ++i)
      line((i == 0 ? head : pad) + params[i] +
           (i + 1 == params.size() ? ") {" : ","));
  }
  ++indent;
  if (auto bytes = func->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
      bytes && bytes.getInt() > 0)
    line("extern __shared__ __align__(16) unsigned char tj_smem[]; // " +
         std::to_string(bytes.getInt()) + " bytes, set at launch");
  if (clusterSize > 1) {
    func.walk([&](tile::ClusterReduceOp op) {
      clusterBarOf[op] = clusterMbarriers;
      clusterMbarriers += runsOnce(op) ? 1 : 2;
      if (!runsOnce(op))
        line("unsigned tj_cluster_runs" + std::to_string(clusterBarOf[op]) +
             " = 0;");
    });
    if (clusterMbarriers > 0) {
      std::string k = std::to_string(clusterMbarriers);
      line("__shared__ __align__(8) unsigned long long tj_cluster_bar[" + k +
           "];");
      line("tj_cluster_mbarriers_init<" + k + ">(tj_cluster_bar);");
      line("bool tj_cluster_init_waited = false;");
    }
  }
  emitBlock(body, {}, {});
  if (clusterMbarriers > 0)
    line("tj_cluster_init_wait(tj_cluster_init_waited);");
  --indent;
  line("}");
}

void KernelEmitter::emitBlock(Block &block, ArrayRef<std::string> yieldTargets,
                              ArrayRef<Value> yieldTargetValues) {
  for (Operation &op : block) {
    if (isa<scf::YieldOp>(op)) {
      yieldTo(&op, yieldTargets, yieldTargetValues);
      continue;
    }
    if (isa<func::ReturnOp>(op)) {
      if (op.getNumOperands() != 0)
        fail(&op, "a kernel must not return values");
      if (op.getParentOp() != func.getOperation())
        fail(&op, "return inside a region");
      continue; // the end of the kernel body
    }
    emitOp(&op);
  }
}

void KernelEmitter::emitOp(Operation *op) {
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp);
  if (op->getNumRegions() != 0)
    fail(op, "ops with regions other than scf.for/scf.if are not supported");
  if (auto cr = dyn_cast<tile::ClusterReduceOp>(op))
    return emitClusterReduce(cr);
  if (op->getNumResults() > 1)
    fail(op, "ops with several results are not supported");
  locate(op);
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return emitConstant(c);
  if (emitArith(op) || emitMath(op) || emitVector(op) || emitSimt(op))
    return;
  fail(op, "unsupported op");
}

void KernelEmitter::emitConstant(arith::ConstantOp op) {
  Type t = op.getType();
  Type et = elemType(t);
  if (!isa<VectorType>(t))
    return define(op, op.getResult(), [&](const std::string &) {
      return literal(op.getValue(), t, op);
    });
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    fail(op, "only dense vector constants are supported");
  if (dense.isSplat()) {
    std::string lit = literal(dense.getSplatValue<Attribute>(), et, op);
    return define(op, op.getResult(), [&](const std::string &) { return lit; });
  }
  std::vector<std::string> elems;
  for (Attribute a : dense.getValues<Attribute>())
    elems.push_back(literal(a, et, op));
  std::string n = bind(op.getResult());
  stmt(declaration(t, n, op) + " = {" + llvm::join(elems, ", ") + "};");
}

bool KernelEmitter::emitArith(Operation *op) {
  if (op->getName().getDialectNamespace() != "arith")
    return false;
  Value res = op->getResult(0);
  Type rt = elemType(res.getType());
  Type at = op->getNumOperands() ? elemType(op->getOperand(0).getType()) : rt;

  auto floatBin = [&](const char *sym) {
    requireFloat(rt, op);
    define(op, res, [&](const std::string &e) {
      return fromF32(toF32(r(op, 0, e), rt) + " " + sym + " " +
                         toF32(r(op, 1, e), rt),
                     rt);
    });
  };
  auto floatCall = [&](const char *fn) {
    requireFloat(rt, op);
    define(op, res, [&](const std::string &e) {
      return fromF32(std::string(fn) + "(" + toF32(r(op, 0, e), rt) + ", " +
                         toF32(r(op, 1, e), rt) + ")",
                     rt);
    });
  };
  auto intBin = [&](const char *sym) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    define(op, res, [&](const std::string &e) {
      return r(op, 0, e) + " " + sym + " " + r(op, 1, e);
    });
  };
  auto logic = [&](const char *sym) {
    define(op, res, [&](const std::string &e) {
      return r(op, 0, e) + " " + sym + " " + r(op, 1, e);
    });
  };
  // Unsigned integer op: compute on the unsigned type, convert back.
  auto unsignedBin = [&](const char *sym) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    std::string ut = unsignedType(rt, op), st = scalarType(rt, op);
    define(op, res, [&](const std::string &e) {
      return "(" + st + ")((" + ut + ")" + r(op, 0, e) + " " + sym + " (" + ut +
             ")" + r(op, 1, e) + ")";
    });
  };
  auto minMax = [&](const char *cmp, bool isUnsigned) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    std::string cast = isUnsigned ? "(" + unsignedType(rt, op) + ")" : "";
    define(op, res, [&](const std::string &e) {
      std::string a = r(op, 0, e), b = r(op, 1, e);
      return cast + a + " " + cmp + " " + cast + b + " ? " + a + " : " + b;
    });
  };
  // Signed view of an integer operand (i1 true is -1).
  auto signedInt = [&](const std::string &x, Type t) {
    return t.isInteger(1) ? "(" + x + " ? -1 : 0)" : x;
  };

  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<arith::AddFOp>([&](auto) {
        floatBin("+");
        return true;
      })
      .Case<arith::SubFOp>([&](auto) {
        floatBin("-");
        return true;
      })
      .Case<arith::MulFOp>([&](auto) {
        floatBin("*");
        return true;
      })
      .Case<arith::DivFOp>([&](auto) {
        floatBin("/");
        return true;
      })
      .Case<arith::RemFOp>([&](auto) {
        floatCall("fmodf");
        return true;
      })
      .Case<arith::MaximumFOp>([&](auto) {
        floatCall("tj_maximumf");
        return true;
      })
      .Case<arith::MinimumFOp>([&](auto) {
        floatCall("tj_minimumf");
        return true;
      })
      .Case<arith::MaxNumFOp>([&](auto) {
        floatCall("fmaxf");
        return true;
      })
      .Case<arith::MinNumFOp>([&](auto) {
        floatCall("fminf");
        return true;
      })
      .Case<math::CopySignOp>([&](auto) {
        floatCall("copysignf");
        return true;
      })
      .Case<arith::NegFOp>([&](auto) {
        requireFloat(rt, op);
        define(op, res, [&](const std::string &e) {
          return fromF32("-" + toF32(r(op, 0, e), rt), rt);
        });
        return true;
      })
      .Case<arith::AddIOp>([&](auto) {
        intBin("+");
        return true;
      })
      .Case<arith::SubIOp>([&](auto) {
        intBin("-");
        return true;
      })
      .Case<arith::MulIOp>([&](auto) {
        intBin("*");
        return true;
      })
      .Case<arith::DivSIOp>([&](auto) {
        intBin("/");
        return true;
      })
      .Case<arith::RemSIOp>([&](auto) {
        intBin("%");
        return true;
      })
      .Case<arith::ShLIOp>([&](auto) {
        intBin("<<");
        return true;
      })
      .Case<arith::ShRSIOp>([&](auto) {
        intBin(">>");
        return true;
      })
      .Case<arith::DivUIOp>([&](auto) {
        unsignedBin("/");
        return true;
      })
      .Case<arith::RemUIOp>([&](auto) {
        unsignedBin("%");
        return true;
      })
      .Case<arith::ShRUIOp>([&](auto) {
        unsignedBin(">>");
        return true;
      })
      .Case<arith::AndIOp>([&](auto) {
        logic("&");
        return true;
      })
      .Case<arith::OrIOp>([&](auto) {
        logic("|");
        return true;
      })
      .Case<arith::XOrIOp>([&](auto) {
        logic("^");
        return true;
      })
      .Case<arith::MaxSIOp>([&](auto) {
        minMax(">", false);
        return true;
      })
      .Case<arith::MinSIOp>([&](auto) {
        minMax("<", false);
        return true;
      })
      .Case<arith::MaxUIOp>([&](auto) {
        minMax(">", true);
        return true;
      })
      .Case<arith::MinUIOp>([&](auto) {
        minMax("<", true);
        return true;
      })
      .Case<arith::CmpFOp>([&](arith::CmpFOp c) {
        requireFloat(at, op);
        using P = arith::CmpFPredicate;
        P pred = c.getPredicate();
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = toF32(r(op, 0, e), at), b = toF32(r(op, 1, e), at);
          switch (pred) {
          case P::AlwaysFalse:
            return "false";
          case P::OEQ:
            return a + " == " + b;
          case P::OGT:
            return a + " > " + b;
          case P::OGE:
            return a + " >= " + b;
          case P::OLT:
            return a + " < " + b;
          case P::OLE:
            return a + " <= " + b;
          case P::ONE:
            return "(" + a + " < " + b + " || " + a + " > " + b + ")";
          case P::ORD:
            return "(" + a + " == " + a + " && " + b + " == " + b + ")";
          case P::UEQ:
            return "!(" + a + " < " + b + " || " + a + " > " + b + ")";
          case P::UGT:
            return "!(" + a + " <= " + b + ")";
          case P::UGE:
            return "!(" + a + " < " + b + ")";
          case P::ULT:
            return "!(" + a + " >= " + b + ")";
          case P::ULE:
            return "!(" + a + " > " + b + ")";
          case P::UNE:
            return a + " != " + b;
          case P::UNO:
            return "(" + a + " != " + a + " || " + b + " != " + b + ")";
          case P::AlwaysTrue:
            return "true";
          }
          fail(op, "unknown predicate");
        });
        return true;
      })
      .Case<arith::CmpIOp>([&](arith::CmpIOp c) {
        using P = arith::CmpIPredicate;
        P pred = c.getPredicate();
        bool isUnsigned = pred == P::ult || pred == P::ule || pred == P::ugt ||
                          pred == P::uge;
        std::string cast = isUnsigned ? "(" + unsignedType(at, op) + ")" : "";
        const char *sym = "==";
        switch (pred) {
        case P::eq:
          sym = "==";
          break;
        case P::ne:
          sym = "!=";
          break;
        case P::slt:
        case P::ult:
          sym = "<";
          break;
        case P::sle:
        case P::ule:
          sym = "<=";
          break;
        case P::sgt:
        case P::ugt:
          sym = ">";
          break;
        case P::sge:
        case P::uge:
          sym = ">=";
          break;
        }
        bool signedCmp = !isUnsigned && pred != P::eq && pred != P::ne;
        define(op, res, [&](const std::string &e) {
          std::string a = r(op, 0, e), b = r(op, 1, e);
          if (signedCmp) {
            a = signedInt(a, at);
            b = signedInt(b, at);
          }
          return cast + a + " " + sym + " " + cast + b;
        });
        return true;
      })
      .Case<arith::SelectOp>([&](auto) {
        define(op, res, [&](const std::string &e) {
          return r(op, 0, e) + " ? " + r(op, 1, e) + " : " + r(op, 2, e);
        });
        return true;
      })
      .Case<arith::ExtFOp, arith::TruncFOp>([&](auto) {
        requireFloat(at, op);
        requireFloat(rt, op);
        // bf16 pairs widen from their 32-bit word (tj_bf16_at).
        auto k = vecLen(op->getOperand(0).getType(), op);
        if (at.isBF16() && rt.isF32() && k && *k % 2 == 0) {
          std::string x = name(op->getOperand(0), op);
          define(op, res, [&](const std::string &e) {
            return "tj_bf16_at(" + x + ", " + e + ")";
          });
          return true;
        }
        define(op, res, [&](const std::string &e) {
          return fromF32(toF32(r(op, 0, e), at), rt);
        });
        return true;
      })
      .Case<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::IndexCastOp,
            arith::IndexCastUIOp>([&](auto) {
        bool zext = isa<arith::ExtUIOp, arith::IndexCastUIOp>(op);
        std::string st = scalarType(rt, op);
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = r(op, 0, e);
          if (rt.isInteger(1))
            return "(" + a + " & 1) != 0";
          if (at.isInteger(1))
            return zext ? "(" + st + ")" + a
                        : "(" + st + ")(" + a + " ? -1 : 0)";
          if (zext && at.isInteger(32) && !rt.isInteger(32))
            return "(" + st + ")(unsigned)" + a;
          return "(" + st + ")" + a;
        });
        return true;
      })
      .Case<arith::SIToFPOp, arith::UIToFPOp>([&](auto) {
        requireFloat(rt, op);
        bool isUnsigned = isa<arith::UIToFPOp>(op);
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = r(op, 0, e);
          bool wide = at.isInteger(64) || at.isIndex();
          if (at.isInteger(1))
            a = isUnsigned ? "(" + a + " ? 1 : 0)" : "(" + a + " ? -1 : 0)";
          else if (isUnsigned)
            a = "(" + unsignedType(at, op) + ")" + a;
          if (rt.isF32())
            return "(float)" + a;
          std::string fn = isUnsigned ? (wide ? "__ull2" : "__uint2")
                                      : (wide ? "__ll2" : "__int2");
          return fn + (rt.isBF16() ? "bfloat16_rn(" : "half_rn(") + a + ")";
        });
        return true;
      })
      .Case<arith::FPToSIOp, arith::FPToUIOp>([&](auto) {
        requireFloat(at, op);
        if (rt.isInteger(1))
          fail(op, "conversion to i1 is not supported");
        bool isUnsigned = isa<arith::FPToUIOp>(op);
        std::string st = scalarType(rt, op);
        define(op, res, [&](const std::string &e) {
          std::string a = toF32(r(op, 0, e), at);
          if (isUnsigned)
            return "(" + st + ")(" + unsignedType(rt, op) + ")" + a;
          return "(" + st + ")" + a;
        });
        return true;
      })
      .Case<arith::BitcastOp>([&](auto) {
        const char *fn = nullptr;
        if (at.isF32() && rt.isInteger(32))
          fn = "__float_as_int";
        else if (at.isInteger(32) && rt.isF32())
          fn = "__int_as_float";
        if (!fn)
          fail(op, "only f32 <-> i32 bitcasts are supported");
        define(op, res, [&](const std::string &e) {
          return std::string(fn) + "(" + r(op, 0, e) + ")";
        });
        return true;
      })
      .Default([&](Operation *) { return false; });
}

bool KernelEmitter::emitMath(Operation *op) {
  if (op->getName().getDialectNamespace() != "math")
    return false;
  static const llvm::StringMap<const char *> kFloatFns = {
      {"math.exp", "expf"},           {"math.exp2", "exp2f"},
      {"math.expm1", "expm1f"},       {"math.log", "logf"},
      {"math.log2", "log2f"},         {"math.log10", "log10f"},
      {"math.log1p", "log1pf"},       {"math.absf", "fabsf"},
      {"math.tanh", "tanhf"},         {"math.sqrt", "sqrtf"},
      {"math.rsqrt", "rsqrtf"},       {"math.sin", "sinf"},
      {"math.cos", "cosf"},           {"math.tan", "tanf"},
      {"math.atan", "atanf"},         {"math.erf", "erff"},
      {"math.floor", "floorf"},       {"math.ceil", "ceilf"},
      {"math.round", "roundf"},       {"math.roundeven", "rintf"},
      {"math.trunc", "truncf"},       {"math.cbrt", "cbrtf"},
      {"math.powf", "powf"},          {"math.atan2", "atan2f"},
      {"math.copysign", "copysignf"}, {"math.fma", "fmaf"}};
  Value res = op->getResult(0);
  Type rt = elemType(res.getType());
  StringRef opName = op->getName().getStringRef();
  if (opName == "math.absi") {
    if (!(rt.isInteger(32) || rt.isInteger(64)))
      fail(op, "math.absi needs i32 or i64");
    define(op, res, [&](const std::string &e) {
      return std::string(rt.isInteger(32) ? "abs(" : "llabs(") + r(op, 0, e) +
             ")";
    });
    return true;
  }
  auto it = kFloatFns.find(opName);
  if (it == kFloatFns.end())
    return false;
  const char *fn = it->second;
  // fastmath<afn> on exp and exp2: the hardware ex2 approximation (as
  // Triton's), with denormal results flushed to zero.
  if (auto fm = op->getAttrOfType<arith::FastMathFlagsAttr>("fastmath");
      fm && arith::bitEnumContainsAll(fm.getValue(), arith::FastMathFlags::afn))
    fn = opName == "math.exp"    ? "tj_fast_exp"
         : opName == "math.exp2" ? "tj_fast_exp2"
                                 : fn;
  requireFloat(rt, op);
  for (Value v : op->getOperands())
    if (elemType(v.getType()) != rt)
      fail(op, "operand and result types differ");
  define(op, res, [&](const std::string &e) {
    std::vector<std::string> args;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      args.push_back(toF32(r(op, i, e), rt));
    return fromF32(std::string(fn) + "(" + llvm::join(args, ", ") + ")", rt);
  });
  return true;
}

bool KernelEmitter::emitVector(Operation *op) {
  if (op->getName().getDialectNamespace() != "vector")
    return false;
  Value res = op->getResult(0);
  if (auto b = dyn_cast<vector::BroadcastOp>(op)) {
    Type st = b.getSource().getType();
    auto k = vecLen(res.getType(), op);
    auto sk = vecLen(st, op);
    if (sk && *sk != 1 && *sk != *k)
      fail(op, "unsupported broadcast shape");
    define(op, res, [&](const std::string &e) {
      return ref(b.getSource(), sk && *sk == 1 ? "0" : e, op);
    });
    return true;
  }
  if (op->getName().getStringRef() == "vector.splat") {
    define(op, res, [&](const std::string &) { return r(op, 0, ""); });
    return true;
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    Value src = red.getVector();
    Type et = elemType(src.getType());
    int64_t k = *vecLen(src.getType(), op);
    using K = vector::CombiningKind;
    K kind = red.getKind();
    bool isFloat = isa<FloatType>(et);
    if (isFloat)
      requireFloat(et, op);
    std::string ut = isFloat ? "" : "(" + unsignedType(et, op) + ")";
    auto combine = [&](const std::string &a0,
                       const std::string &b0) -> std::string {
      std::string a = isFloat ? toF32(a0, et) : a0;
      std::string b = isFloat ? toF32(b0, et) : b0;
      std::string c;
      switch (kind) {
      case K::ADD:
        c = a + " + " + b;
        break;
      case K::MUL:
        c = a + " * " + b;
        break;
      case K::MAXIMUMF:
        c = "tj_maximumf(" + a + ", " + b + ")";
        break;
      case K::MINIMUMF:
        c = "tj_minimumf(" + a + ", " + b + ")";
        break;
      case K::MAXNUMF:
        c = "fmaxf(" + a + ", " + b + ")";
        break;
      case K::MINNUMF:
        c = "fminf(" + a + ", " + b + ")";
        break;
      case K::MAXSI:
        c = a + " > " + b + " ? " + a + " : " + b;
        break;
      case K::MINSI:
        c = a + " < " + b + " ? " + a + " : " + b;
        break;
      case K::MAXUI:
        c = ut + a + " > " + ut + b + " ? " + a + " : " + b;
        break;
      case K::MINUI:
        c = ut + a + " < " + ut + b + " ? " + a + " : " + b;
        break;
      case K::AND:
        c = a + " & " + b;
        break;
      case K::OR:
        c = a + " | " + b;
        break;
      case K::XOR:
        c = a + " ^ " + b;
        break;
      }
      return isFloat ? fromF32(c, et) : c;
    };
    bool floatKind = kind == K::MAXIMUMF || kind == K::MINIMUMF ||
                     kind == K::MAXNUMF || kind == K::MINNUMF;
    bool bothKind = kind == K::ADD || kind == K::MUL;
    if (isFloat ? !(floatKind || bothKind) : floatKind)
      fail(op, "reduction kind does not fit the element type");
    if (et.isInteger(1) && bothKind)
      fail(op, "add/mul reductions of i1 are not supported");
    std::string n = bind(res);
    const std::string &s = name(src, op);
    std::string decl = declaration(res.getType(), n, op);
    int64_t first = 0;
    if (Value acc = red.getAcc()) {
      line(decl + " = " + name(acc, op) + ";");
    } else {
      std::string init = decl + " = " + s + "[0];";
      if (k > 1)
        line(init);
      else
        stmt(init);
      first = 1;
    }
    if (first < k) {
      if (k - first == 1) {
        std::string e = std::to_string(first);
        stmt(n + " = " + combine(n, s + "[" + e + "]") + ";");
      } else {
        line("#pragma unroll");
        line("for (int e = " + std::to_string(first) + "; e < " +
             std::to_string(k) + "; ++e)");
        ++indent;
        stmt(n + " = " + combine(n, s + "[e]") + ";");
        --indent;
      }
    }
    return true;
  }
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    auto pos = ex.getMixedPosition();
    if (pos.empty()) {
      declareCopy(op, res, name(ex.getSource(), op));
      return true;
    }
    if (pos.size() != 1)
      fail(op, "only 1-D extracts are supported");
    std::string idx;
    if (auto a = dyn_cast<Attribute>(pos[0])) {
      int64_t i = cast<IntegerAttr>(a).getInt();
      if (i < 0)
        fail(op, "poison extract position");
      idx = std::to_string(i);
    } else {
      idx = name(cast<Value>(pos[0]), op);
    }
    define(op, res, [&](const std::string &) {
      return name(ex.getSource(), op) + "[" + idx + "]";
    });
    return true;
  }
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    std::vector<std::string> elems;
    for (Value v : fe.getElements())
      elems.push_back(name(v, op));
    std::string n = bind(res);
    stmt(declaration(res.getType(), n, op) + " = {" + llvm::join(elems, ", ") +
         "};");
    return true;
  }
  if (isa<vector::StepOp>(op)) {
    std::string st = scalarType(elemType(res.getType()), op);
    define(op, res, [&](const std::string &e) {
      return "(" + st + ")" + (e.empty() ? "0" : e);
    });
    return true;
  }
  return false;
}

bool KernelEmitter::emitSimt(Operation *op) {
  if (isa<simt::ThreadIdOp>(op)) {
    define(op, op->getResult(0),
           [](const std::string &) { return "(int)threadIdx.x"; });
    return true;
  }
  auto axisName = [](uint32_t axis) {
    return axis == 0 ? "x" : axis == 1 ? "y" : "z";
  };
  if (auto b = dyn_cast<simt::BlockIdOp>(op)) {
    define(op, b.getResult(), [&](const std::string &) {
      return std::string("(int)blockIdx.") + axisName(b.getAxis());
    });
    return true;
  }
  if (auto g = dyn_cast<simt::GridDimOp>(op)) {
    define(op, g.getResult(), [&](const std::string &) {
      return std::string("(int)gridDim.") + axisName(g.getAxis());
    });
    return true;
  }
  if (auto br = dyn_cast<simt::BlockReduceOp>(op)) {
    const char *fn = br.getKind() == ReduceKind::Sum   ? "tj_block_sum"
                     : br.getKind() == ReduceKind::Max ? "tj_block_max"
                                                       : "tj_block_min";
    define(op, br.getResult(), [&](const std::string &) {
      return std::string(fn) + "<" + std::to_string(threads) + ">(" +
             name(br.getSrc(), op) + ")";
    });
    return true;
  }
  // Each tile's group width (tile-assign-layout).
  auto groupOf = [&](Value v) {
    return std::to_string(
        layoutGroup(func, *vecLen(v.getType(), op) * threads));
  };
  // result = fn<R, C, P, matrix group, vector group[, combine]>(operand 0)
  // for the row ops, whose matrix is R x C and vector R.
  auto rowsCall = [&](const char *fn, int64_t cols, Value matrix, Value vector,
                      std::optional<ReduceKind> kind) {
    Value result = op->getResult(0);
    std::string n = bind(result);
    line(declaration(result.getType(), n, op) + ";");
    locate(op);
    stmt(std::string(fn) + "<" +
         std::to_string(*vecLen(vector.getType(), op) * threads) + ", " +
         std::to_string(cols) + ", " + std::to_string(threads) + ", " +
         groupOf(matrix) + ", " + groupOf(vector) +
         (kind ? std::string(", ") + combinerName(*kind) : std::string()) +
         ">(" + name(op->getOperand(0), op) + ", " + n + ");");
  };
  if (auto rr = dyn_cast<simt::ReduceRowsOp>(op)) {
    rowsCall("tj_reduce_rows", rr.getCols(), rr.getSrc(), rr.getResult(),
             rr.getKind());
    return true;
  }
  if (auto br = dyn_cast<simt::BroadcastRowsOp>(op)) {
    rowsCall("tj_broadcast_rows", br.getCols(), br.getResult(), br.getSrc(),
             std::nullopt);
    return true;
  }
  if (auto dot = dyn_cast<simt::DotOp>(op)) {
    std::string n = bind(dot.getResult());
    line(declaration(dot.getType(), n, op) + ";");
    locate(op);
    stmt("tj_dot<" + std::to_string(dot.getM()) + ", " +
         std::to_string(dot.getN()) + ", " + std::to_string(dot.getK()) + ", " +
         std::to_string(threads) + ", " + groupOf(dot.getA()) + ", " +
         groupOf(dot.getB()) + ", " + groupOf(dot.getResult()) + ">(" +
         name(dot.getA(), op) + ", " + name(dot.getB(), op) + ", " +
         name(dot.getAcc(), op) + ", " + n + ");");
    return true;
  }
  if (auto dl = dyn_cast<simt::DotLoopOp>(op)) {
    std::string n = bind(dl.getResult());
    line(declaration(dl.getType(), n, op) + ";");
    locate(op);
    // A view whose rows are contiguous (stride 1 down a column) is kept in
    // shared memory the other way round; any other view is copied
    // element by element at run time.
    auto rowsContiguous = [](Value rowStride, Value colStride) {
      return matchPattern(rowStride, m_One()) &&
             !matchPattern(colStride, m_One());
    };
    auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
    std::vector<std::string> args = {
        "tj_smem + " + std::to_string(dl.getSmemOffset())};
    for (Value v : op->getOperands()) // A's view, B's view, K range, acc
      args.push_back(name(v, op));
    args.push_back(n);
    stmt("tj_dot_loop<" + std::to_string(dl.getM()) + ", " +
         std::to_string(dl.getN()) + ", " + std::to_string(dl.getK()) + ", " +
         std::to_string(dl.getStages()) + ", " + std::to_string(threads) +
         ", " + groupOf(dl.getResult()) + ", " +
         flag(rowsContiguous(dl.getARowStride(), dl.getAColStride())) + ", " +
         flag(rowsContiguous(dl.getBRowStride(), dl.getBColStride())) + ", " +
         flag(matchPattern(dl.getAcc(), m_AnyZeroFloat())) + ", " +
         flag(func->hasAttr(attr::kDotSpecialize)) + ">(" +
         llvm::join(args, ", ") + ");");
    return true;
  }
  if (auto ld = dyn_cast<simt::LoadOp>(op)) {
    Type et = elemType(ld.getType());
    std::string other =
        ld.getOther() ? name(ld.getOther(), op) : zeroOf(et, op);
    auto element = [&](const std::string &e) {
      std::string access =
          name(ld.getPtr(), op) + "[" + ref(ld.getOffsets(), e, op) + "]";
      if (!ld.getMask())
        return access;
      return ref(ld.getMask(), e, op) + " ? " + access + " : " + other;
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      define(op, ld.getResult(), element);
      return true;
    }
    std::string n = bind(ld.getResult());
    line(declaration(ld.getType(), n, op) + ";");
    forEachGroup(
        op, ld.getPtr(), ld.getOffsets(), ld.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vload<" + bytes + ">(&" + n + "[tj_g], " + addr + ");";
        },
        [&](const std::string &e) {
          return n + "[" + e + "] = " + element(e) + ";";
        });
    return true;
  }
  if (auto st = dyn_cast<simt::StoreOp>(op)) {
    auto store = [&](const std::string &e) {
      return name(st.getPtr(), op) + "[" + ref(st.getOffsets(), e, op) +
             "] = " + ref(st.getValue(), e, op) + ";";
    };
    auto k = vecLen(st.getOffsets().getType(), op);
    if (!k) {
      // A uniform scalar store: one thread does it.
      std::string cond = "threadIdx.x == 0";
      if (st.getMask())
        cond += " && " + ref(st.getMask(), "", op);
      stmt("if (" + cond + ") " + store(""));
      return true;
    }
    auto element = [&](const std::string &e) {
      if (st.getMask())
        return "if (" + ref(st.getMask(), e, op) + ") " + store(e);
      return store(e);
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(element(e)); });
      return true;
    }
    Type et = elemType(st.getValue().getType());
    std::string value = name(st.getValue(), op);
    forEachGroup(
        op, st.getPtr(), st.getOffsets(), st.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vstore<" + bytes + ">(" + addr + ", &" + value +
                 "[tj_g]);";
        },
        element);
    return true;
  }
  if (auto cp = dyn_cast<simt::CopyAsyncOp>(op)) {
    std::string dst = name(cp.getDst(), op), src = name(cp.getSrc(), op);
    auto at = [&](const std::string &p, Value offs, const std::string &e) {
      return p + "[" + ref(offs, e, op) + "]";
    };
    // Lanes that cannot take a whole group copy element by element, at once.
    auto element = [&](const std::string &e) {
      std::string copy = at(dst, cp.getDstOffsets(), e) + " = " +
                         at(src, cp.getSrcOffsets(), e) + ";";
      if (cp.getMask())
        return "if (" + ref(cp.getMask(), e, op) + ") " + copy;
      return copy;
    };
    auto k = vecLen(cp.getSrcOffsets().getType(), op);
    if (!k)
      fail(op, "copies tiles: its offsets must be per-thread vectors");
    int64_t width = accessWidth(op);
    Type et = cp.getSrc().getType().getElementType();
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(element(e)); });
      return true;
    }
    forEachGroup(
        op, cp.getSrc(), cp.getSrcOffsets(), cp.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_copy_async<" + bytes + ">(" + dst + " + " +
                 ref(cp.getDstOffsets(), "tj_g", op) + ", " + addr + ");";
        },
        element, cp.getDst(), cp.getDstOffsets());
    return true;
  }
  if (auto pf = dyn_cast<tile::PrefetchL2Op>(op)) {
    // One lane asks; the copy engine fetches the range.
    stmt("if (threadIdx.x == 0) tj_prefetch_l2(" + name(pf.getPtr(), op) +
         " + " + name(pf.getOffset(), op) + ", " + name(pf.getCount(), op) +
         ");");
    return true;
  }
  if (isa<tile::CopyCommitOp>(op)) {
    stmt("tj_copy_commit();");
    return true;
  }
  if (auto w = dyn_cast<tile::CopyWaitOp>(op)) {
    stmt("tj_copy_wait<" + std::to_string(w.getPending()) + ">();");
    if (!w.getLaneOnly())
      stmt("__syncthreads();");
    return true;
  }
  if (auto ap = dyn_cast<tile::AddPtrOp>(op)) {
    define(op, ap.getResult(), [&](const std::string &) {
      return name(ap.getPtr(), op) + " + " + name(ap.getOffset(), op);
    });
    return true;
  }
  if (auto sa = dyn_cast<tile::SharedAllocOp>(op)) {
    // A pointer into tj_smem within this function, so nvcc keeps its
    // accesses as shared-memory ones (LDS/STS), not generic.
    define(op, sa.getResult(), [&](const std::string &) {
      return "reinterpret_cast<" + scalarType(sa.getType(), op) +
             ">(tj_smem + " + std::to_string(sa.getOffset()) + ")";
    });
    return true;
  }
  if (isa<tile::BarrierOp>(op)) {
    stmt("__syncthreads();");
    return true;
  }
  return false;
}

void KernelEmitter::emitClusterReduce(tile::ClusterReduceOp op) {
  std::string t = scalarType(op.getSrcs().front().getType(), op);
  if (clusterSize == 1) { // a cluster of one program: nothing to combine
    for (auto [src, res] : llvm::zip(op.getSrcs(), op.getResults()))
      line(t + " " + bind(res) + " = " + name(src, op) + ";");
    return;
  }
  std::string id = "tj_cluster" + std::to_string(clusterOps++);
  std::string n = std::to_string(op.getSrcs().size());
  std::vector<std::string> srcs;
  for (Value src : op.getSrcs())
    srcs.push_back(name(src, op));
  std::string combiner =
      std::to_string(clusterSize) + ", " + combinerName(op.getKind());
  line(t + " " + id + "[" + n + "] = {" + llvm::join(srcs, ", ") + "};");
  // In a loop the slots are written again each run: two buffers used in
  // turn.
  bool once = runsOnce(op);
  std::string bar = std::to_string(clusterBarOf.lookup(op));
  std::string slots = std::to_string((once ? 1 : 2) * clusterSize *
                                     int64_t(op.getSrcs().size()));
  line("__shared__ " + t + " " + id + "_slots[" + slots + "];");
  locate(op);
  if (once)
    stmt("tj_cluster_reduce_once<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_init_waited, " + id +
         ");");
  else
    stmt("tj_cluster_reduce_loop<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_runs" + bar +
         ", tj_cluster_init_waited, " + id + ");");
  for (auto [i, res] : llvm::enumerate(op.getResults()))
    line(t + " " + bind(res) + " = " + id + "[" + std::to_string(i) + "];");
}

void KernelEmitter::emitFor(scf::ForOp op) {
  Value iv = op.getInductionVar();
  std::string ivType = scalarType(iv.getType(), op);
  // Loop-carried values live in variables declared before the loop; the
  // loop's results are those same variables after it.
  std::vector<std::string> carried;
  std::vector<Value> carriedValues;
  for (auto [arg, init, result] : llvm::zip_equal(
           op.getRegionIterArgs(), op.getInitArgs(), op.getResults())) {
    declareCopy(op, arg, name(init, op));
    std::string n = names[arg];
    bindAs(result, n);
    carried.push_back(n);
    carriedValues.push_back(arg);
  }
  locate(op); // after the carried values: #line goes before the `for`
  std::string i = bind(iv);
  std::string lb = name(op.getLowerBound(), op);
  std::string ub = name(op.getUpperBound(), op);
  std::string step = name(op.getStep(), op);
  std::string cond = i + " < " + ub;
  if (op.getUnsignedCmp()) {
    std::string ut = "(" + unsignedType(iv.getType(), op) + ")";
    cond = ut + i + " < " + ut + ub;
  }
  stmt("for (" + ivType + " " + i + " = " + lb + "; " + cond + "; " + i +
       " += " + step + ") {");
  ++indent;
  emitBlock(*op.getBody(), carried, carriedValues);
  --indent;
  line("}");
}

void KernelEmitter::emitIf(scf::IfOp op) {
  std::vector<std::string> results;
  std::vector<Value> resultValues;
  for (Value res : op.getResults()) {
    std::string n = bind(res);
    line(declaration(res.getType(), n, op) + ";");
    results.push_back(n);
    resultValues.push_back(res);
  }
  stmt("if (" + name(op.getCondition(), op) + ") {");
  ++indent;
  emitBlock(op.getThenRegion().front(), results, resultValues);
  --indent;
  if (!op.getElseRegion().empty()) {
    line("} else {");
    ++indent;
    emitBlock(op.getElseRegion().front(), results, resultValues);
    --indent;
  }
  line("}");
}

} // namespace

const char *cudaPrelude() { return kPrelude; }

std::string emitCuda(ModuleOp module) {
  std::string out = "// Generated by tilejit from SIMT-level MLIR.\n";
  out += kPrelude;
  bool dotLoops = false;
  module.walk([&](simt::DotLoopOp) { dotLoops = true; });
  if (dotLoops)
    for (const char *text : kDotLoop)
      out += text;
  bool any = false;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr(attr::kKernel))
      continue;
    out += "\n";
    KernelEmitter(out, func).emit();
    any = true;
  }
  if (!any)
    throw Error("emitCuda: the module has no kernel (func.func with " +
                std::string(attr::kKernel) + ")");
  return out;
}

} // namespace tilejit
