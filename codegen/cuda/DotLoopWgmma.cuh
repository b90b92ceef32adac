// ---- tile.dot_loop on sm_90a: warpgroup MMA (wgmma) ----
// The W / 4 warpgroups of the program split the M rows; each issues
// wgmma.mma_async over its rows and all N columns, reading A and B straight
// from the shared-memory ring through matrix descriptors: no ldmatrix, no
// fragment registers for the operands. The ring's arrays (tj_smem_at) are
// already in wgmma's layouts: a K-major operand (rows along K, K = 64, 32 or
// 16) in the 128-, 64- or 32-byte swizzle mode, an MN-major one (rows along
// M or N, of 64 elements or more) in 128-byte mode atoms of 64 elements x 8
// rows, transposed by the instruction. Copies that complete through
// cp.async, and plain stores, are made visible to the tensor cores by
// fence.proxy.async before the barrier.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// One wgmma.mma_async m64nNk16: f32 d += A B with A (64 x 16) and B
// (16 x N) in shared memory through descriptors, each K-major or (A_MN,
// B_MN) MN-major (scaleD = 0: d = A B). d is the thread's N / 2 accumulators (PTX ISA, wgmma "Register
// Fragments"): those of mma.m16n8 C fragments for N / 8 column blocks of
// the warp's 16 rows.
#define TJ_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define TJ_D16(i) TJ_D4(i), TJ_D4(i + 4), TJ_D4(i + 8), TJ_D4(i + 12)
#define TJ_D32(i) TJ_D16(i), TJ_D16(i + 16)
#define TJ_D64(i) TJ_D32(i), TJ_D32(i + 32)
#define TJ_D128(i) TJ_D64(i), TJ_D64(i + 64)
#define TJ_WGMMA_REGS32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, " \
  "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
#define TJ_WGMMA_REGS64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, " \
  "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, " \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, " \
  "%60, %61, %62, %63}"
#define TJ_WGMMA_REGS128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, " \
  "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, " \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, " \
  "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, " \
  "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, " \
  "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
  "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, " \
  "%120, %121, %122, %123, %124, %125, %126, %127}"
#define TJ_WGMMA(SHAPE, TY, REGS, DA, DB, SCALE, TA, TB, ...)                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n"           \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " "   \
               REGS ", %" DA ", %" DB ", p, 1, 1, %" TA ", %" TB ";\n}\n"    \
               : __VA_ARGS__                                                   \
               : "l"(da), "l"(db), "r"(scaleD), "n"(A_MN), "n"(B_MN))
template <int N, bool A_MN, bool B_MN, typename T> struct tj_wgmma;
template <bool A_MN, bool B_MN, typename T> struct tj_wgmma<64, A_MN, B_MN, T> {
  static __device__ __forceinline__ void run(float *d, unsigned long long da,
                                             unsigned long long db,
                                             int scaleD) {
    if constexpr (tj_is_bf16<T>::value)
      TJ_WGMMA("m64n64k16", "bf16", TJ_WGMMA_REGS32, "32", "33", "34", "35", "36", TJ_D32(0));
    else
      TJ_WGMMA("m64n64k16", "f16", TJ_WGMMA_REGS32, "32", "33", "34", "35", "36", TJ_D32(0));
  }
};
template <bool A_MN, bool B_MN, typename T> struct tj_wgmma<128, A_MN, B_MN, T> {
  static __device__ __forceinline__ void run(float *d, unsigned long long da,
                                             unsigned long long db,
                                             int scaleD) {
    if constexpr (tj_is_bf16<T>::value)
      TJ_WGMMA("m64n128k16", "bf16", TJ_WGMMA_REGS64, "64", "65", "66", "67", "68", TJ_D64(0));
    else
      TJ_WGMMA("m64n128k16", "f16", TJ_WGMMA_REGS64, "64", "65", "66", "67", "68", TJ_D64(0));
  }
};
template <bool A_MN, bool B_MN, typename T> struct tj_wgmma<256, A_MN, B_MN, T> {
  static __device__ __forceinline__ void run(float *d, unsigned long long da,
                                             unsigned long long db,
                                             int scaleD) {
    if constexpr (tj_is_bf16<T>::value)
      TJ_WGMMA("m64n256k16", "bf16", TJ_WGMMA_REGS128, "128", "129", "130", "131", "132", TJ_D128(0));
    else
      TJ_WGMMA("m64n256k16", "f16", TJ_WGMMA_REGS128, "128", "129", "130", "131", "132", TJ_D128(0));
  }
};

#undef TJ_WGMMA
#undef TJ_WGMMA_REGS32
#undef TJ_WGMMA_REGS64
#undef TJ_WGMMA_REGS128
#undef TJ_D4
#undef TJ_D16
#undef TJ_D32
#undef TJ_D64
#undef TJ_D128

// The descriptor of an operand block at p in the ring (tj_smem_at):
// K-major, rows of K elements in the 128-, 64- or 32-byte swizzle mode
// (K = 64, 32, 16), 8-row groups 8 K 2 bytes apart; or MN-major, 128-byte
// mode atoms of 8 rows x 64 elements, 1024 bytes apart along K and
// ROWS x 128 bytes apart along M or N (PTX ISA, wgmma "Matrix Descriptor
// Format"; the layouts as CUTLASS's GMMA descriptors describe them).
template <int K, bool MN, int ROWS>
__device__ __forceinline__ unsigned long long tj_wgmma_desc(const void *p) {
  const unsigned long long a = tj_smem_addr(p);
  constexpr unsigned long long swizzle = MN || K == 64 ? 1 : K == 32 ? 2 : 3;
  constexpr unsigned long long lbo = MN ? ROWS * 128 : 16;
  constexpr unsigned long long sbo = MN ? 1024 : 8 * K * 2;
  return ((a & 0x3ffff) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) |
         (swizzle << 62);
}

// Issues the products of one ring slot (A block at sa, B block at sb) for
// the MI 64-row bands of a warpgroup's rows from m0, all N columns, into d:
// one wgmma per K step and band, after a wgmma.fence, then a commit. With
// ACC_ZERO the first slot's first product overwrites d.
template <int M, int N, int K, int MI, bool A_TR, bool B_TR, bool ACC_ZERO,
          typename T>
__device__ __forceinline__ void tj_wgmma_slot(const T *sa, const T *sb, int m0,
                                              float (&d)[MI][N / 2],
                                              bool first) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    // Where the operands of this K step start: row k = 16 ks of an
    // MN-major array, chunk 2 ks of a K-major one's first row.
    const T *b0 = B_TR ? sb + tj_smem_at<N, K>(0, 2 * ks)
                       : sb + tj_smem_at<K, N>(16 * ks, 0);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m = m0 + mi * 64;
      const T *a0 = A_TR ? sa + tj_smem_at<K, M>(16 * ks, m / 8)
                         : sa + tj_smem_at<M, K>(m, 2 * ks);
      tj_wgmma<N, A_TR, !B_TR, T>::run(
          d[mi], tj_wgmma_desc<K, A_TR, K>(a0), tj_wgmma_desc<K, !B_TR, K>(b0),
          !ACC_ZERO || !first || ks > 0);
    }
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// The accumulators of a warpgroup whose rows start at m0 (MI bands of 64
// rows, wgmma's register fragments: those of mma.m16n8 C fragments for
// N / 8 column blocks of each warp's 16 rows) to and from the row-padded
// M x tj_cs_ld<N> f32 array cs. ZERO: store zeros instead.
template <int N>
__device__ __forceinline__ int tj_wgmma_acc_at(int m0, int mi, int j) {
  const int w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, i = j % 4;
  return (m0 + mi * 64 + w * 16 + lane / 4 + i / 2 * 8) * tj_cs_ld<N> +
         j / 4 * 8 + 2 * (lane % 4) + i % 2;
}
template <int N, int MI>
__device__ __forceinline__ void tj_wgmma_acc_load(const float *cs, int m0,
                                                  float (&d)[MI][N / 2]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < N / 2; j += 2) {
      const float2 v =
          *reinterpret_cast<const float2 *>(cs + tj_wgmma_acc_at<N>(m0, mi, j));
      d[mi][j] = v.x, d[mi][j + 1] = v.y;
    }
}
template <int N, int MI>
__device__ __forceinline__ void tj_wgmma_acc_store(float *cs, int m0,
                                                   const float (&d)[MI][N / 2],
                                                   bool zero) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < N / 2; j += 2)
      *reinterpret_cast<float2 *>(cs + tj_wgmma_acc_at<N>(m0, mi, j)) =
          zero ? make_float2(0.0f, 0.0f) : make_float2(d[mi][j], d[mi][j + 1]);
}

template <int M, int N, int K, int P> struct tj_wgmma_fits {
  static constexpr bool value =
      P % 128 == 0 && M % (64 * (P / 128)) == 0 &&
      (N == 64 || N == 128 || N == 256) && (K == 16 || K == 32 || K == 64);
};

// tj_dot_loop on sm_90a (see tj_dot_loop_mma); `smem` is 1024-byte aligned.
template <int M, int N, int K, int STAGES, int P, int VC, bool A_TR, bool B_TR,
          bool ACC_ZERO, typename T>
__device__ void tj_dot_loop_wgmma(unsigned char *smem, const T *a,
                                  long long aRows, long long aCols,
                                  long long aRs, long long aCs,
                                  long long aRow0, const T *b,
                                  long long bRows, long long bCols,
                                  long long bRs, long long bCs,
                                  long long bCol0, long long kBegin,
                                  long long kEnd, const float *acc,
                                  float *out) {
  constexpr int G = P / 128, MW = M / G, MI = MW / 64, STAGE = M * K + K * N;
  T *ring = reinterpret_cast<T *>(smem);
  float *cs = reinterpret_cast<float *>(smem);
  const int wg = threadIdx.x / 128;
  // A zero accumulator is not loaded: the first product overwrites it
  // (scaleD = 0).
  float d[MI][N / 2];
  if constexpr (!ACC_ZERO) {
    tj_tile_to_rows<M, N, P, VC>(acc, cs);
    __syncthreads();
    tj_wgmma_acc_load<N, MI>(cs, wg * MW, d);
    __syncthreads();
  }

  const long long nk = tj_k_steps<K>(kBegin, kEnd);
  auto fill = [&](long long slot, long long kk) {
    tj_fill_slot<M, N, K, A_TR, B_TR, P>(ring + slot * STAGE, a, aRows, aCols,
                                         aRs, aCs, aRow0, b, bRows, bCols, bRs,
                                         bCs, bCol0, kk, threadIdx.x);
  };
  // One batch of wgmma (a slot's K steps) stays in flight while the next
  // slot's copies are issued: a slot is refilled AHEAD iterations before
  // its use, once the batch that read it is known to be done.
  constexpr int KEEP = STAGES >= 3 ? 1 : 0, AHEAD = STAGES - 1 - KEEP;
  for (int s = 0; s < AHEAD; ++s) {
    if (s < nk)
      fill(s, kBegin + s * K);
    tj_copy_commit();
  }
  for (long long it = 0; it < nk; ++it) {
    tj_copy_wait<AHEAD - 1>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    // Every warpgroup's batches before it - KEEP are done: their slots
    // may be refilled.
    __syncthreads();
    const T *sa = ring + it % STAGES * STAGE, *sb = sa + M * K;
    tj_wgmma_slot<M, N, K, MI, A_TR, B_TR, ACC_ZERO>(sa, sb, wg * MW, d,
                                                     it == 0);
    const long long next = it + AHEAD;
    if (next < nk)
      fill(next % STAGES, kBegin + next * K);
    tj_copy_commit();
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(KEEP) : "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  tj_copy_wait<0>();
  __syncthreads(); // the ring is free: it holds the accumulator now
  tj_wgmma_acc_store<N, MI>(cs, wg * MW, d, ACC_ZERO && nk == 0);
  __syncthreads();
  tj_rows_to_tile<M, N, P, VC>(cs, out);
  __syncthreads(); // before the next call's copies reuse the ring
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
