// ---- tilejit prelude ----
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
// ln x as lg2.approx times ln 2: MUFU.LG2, a multiply and, for subnormal
// inputs, a rescale around it (no .ftz: p log p of an underflowing p stays
// 0, not 0 * -inf), where logf takes about 20 instructions. lg2's error is
// about 2^-22 absolute in log2 x.
__device__ __forceinline__ float tj_fast_log(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y * 0.6931471805599453f;
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
