// ---- tile.dot_loop: a K loop of tensor-core products, pipelined ----
// Printed after the prelude and Matrix.cuh into kernels that have a dot
// loop, followed by DotLoopWgmma.cuh, DotLoopWgmmaWs.cuh and DotLoop.cuh
// (the entry point).
//
// The mma.sync main loop (sm_80 and newer):
// The program's W warps split the M x N accumulator into WM x WN warp tiles
// (the most square split into whole 16 x 16 blocks); each warp keeps its
// tile in mma.sync m16n8k16 fragments for the whole loop. The blocks of A
// and B are copied into a ring of STAGES shared-memory slots with cp.async,
// STAGES - 1 iterations ahead of the product that reads them, and read into
// fragments with ldmatrix (fragment layouts: PTX ISA, "Matrix Fragments for
// mma.m16n8k16" and "ldmatrix").
//
// A block is kept in shared memory as it lies in global memory: an R x L
// array whose rows run along the view's contiguous dimension, so that
// 16-byte copies fill whole chunks; ldmatrix's .trans then gives the
// fragments of either orientation. Chunks are swizzled (chunk c of row r
// stored at c ^ f(r)) so that the 8 rows one ldmatrix reads lie in 8
// distinct 16-byte bank groups.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tile.dot_loop needs sm_80 or newer (cp.async, mma.sync m16n8k16)"
#endif

// The most square split of an M x N tile over W warps into warp tiles of
// whole 16 x 16 blocks (tile-pipeline-dot checks that one exists).
template <int M, int N, int W> struct tj_warp_grid {
  static constexpr int pick() {
    int best = 0, bestSkew = 1 << 30;
    for (int wm = 1; wm <= W; wm *= 2) {
      int wn = W / wm;
      if (M % (16 * wm) != 0 || N % (16 * wn) != 0)
        continue;
      int tm = M / wm, tn = N / wn;
      int skew = tm > tn ? tm / tn : tn / tm;
      if (skew < bestSkew) {
        bestSkew = skew;
        best = wm;
      }
    }
    return best;
  }
  static constexpr int WM = pick();
  static constexpr int WN = WM > 0 ? W / WM : 0;
  static_assert(WM > 0, "no split of the dot loop's tile over the warps");
};

// The shared-space address of p, as the PTX instructions take it.
__device__ __forceinline__ unsigned tj_smem_addr(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void tj_cp_async16(unsigned dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
               "l"(src)
               : "memory");
}

// Element offset of chunk c (8 elements) of row r in an R x L array in
// shared memory. Rows of up to 64 elements (128 bytes) follow each other,
// their chunks swizzled as wgmma's 128-, 64- and 32-byte modes (L = 64, 32,
// 16) place them: chunk c at c ^ (r / (8 / n) mod n), n = L / 8. Longer rows
// are cut into 64-element columns of R rows each, one after the other (the
// atoms of wgmma's MN-major 128-byte mode). Either way the 8 rows an
// ldmatrix reads at one chunk lie in 8 distinct 16-byte bank groups.
template <int R, int L>
__device__ __forceinline__ int tj_smem_at(int r, int c) {
  constexpr int n = L / 8; // chunks per row, a power of two
  if constexpr (n > 8)
    return c / 8 * (R * 64) + r * 64 + ((c % 8) ^ (r & 7)) * 8;
  else if constexpr (n == 8)
    return r * L + (c ^ (r & 7)) * 8;
  else
    return r * L + (c ^ ((r / (8 / n)) & (n - 1))) * 8;
}

// Copies a block of the view (p; rows x cols; strides rs, cs) into the
// R x L array dst. Without TR, array element (s, e) is view element
// (r0 + s, c0 + e) (the view's columns contiguous); with TR it is
// (r0 + e, c0 + s) (the view's rows contiguous). Chunks wholly inside the
// view go by 16-byte cp.async where the memory allows it, chunks wholly
// outside become zeros, and the rest are copied element by element. The P
// threads that copy call it with their index tid in [0, P).
template <int R, int L, bool TR, int P, typename T>
__device__ __forceinline__ void tj_copy_block(T *dst, const T *p,
                                              long long rows, long long cols,
                                              long long rs, long long cs,
                                              long long r0, long long c0,
                                              int tid) {
  const long long along0 = TR ? r0 : c0, alongEnd = TR ? rows : cols;
  const long long fixedEnd = TR ? cols : rows;
  const bool vec = (reinterpret_cast<unsigned long long>(p) & 15) == 0 &&
                   (TR ? rs == 1 && cs % 8 == 0 : cs == 1 && rs % 8 == 0) &&
                   along0 % 8 == 0;
  const long long fixed0 = TR ? c0 : r0, fixedStride = TR ? cs : rs;
  if (vec && fixed0 >= 0 && fixed0 + R <= fixedEnd && along0 >= 0 &&
      along0 + L <= alongEnd) {
    // The whole block lies in the view (all but the edges of a matrix):
    // nothing to check per chunk.
    const T *base = p + fixed0 * fixedStride + along0;
#pragma unroll
    for (int idx = tid; idx < R * L / 8; idx += P) {
      const int s = idx / (L / 8), c = idx % (L / 8);
      tj_cp_async16(tj_smem_addr(dst + tj_smem_at<R, L>(s, c)),
                    base + s * fixedStride + 8 * c);
    }
    return;
  }
  for (int idx = tid; idx < R * L / 8; idx += P) {
    const int s = idx / (L / 8), c = idx % (L / 8);
    const long long along = along0 + 8 * c, fixed = (TR ? c0 : r0) + s;
    const long long vr = TR ? along : fixed, vc = TR ? fixed : along;
    T *d = dst + tj_smem_at<R, L>(s, c);
    const unsigned ds = tj_smem_addr(d);
    const bool fixedIn = fixed >= 0 && fixed < fixedEnd;
    if (vec && fixedIn && along >= 0 && along + 8 <= alongEnd) {
      tj_cp_async16(ds, p + vr * rs + vc * cs);
    } else if (!fixedIn || along >= alongEnd || along + 8 <= 0) {
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(ds),
                   "r"(0)
                   : "memory");
    } else {
      for (int j = 0; j < 8; ++j) {
        const long long a = along + j;
        const long long er = TR ? a : vr, ec = TR ? vc : a;
        T zero;
        memset(&zero, 0, sizeof(T));
        d[j] = a >= 0 && a < alongEnd ? p[er * rs + ec * cs] : zero;
      }
    }
  }
}

// Copies the blocks of iteration kk into a ring slot: A's M x K block at
// (aRow0, kk), then B's K x N block at (kk, bCol0), each kept as it lies in
// memory (A_TR, B_TR: rows contiguous), by the P threads numbered tid.
template <int M, int N, int K, bool A_TR, bool B_TR, int P, typename T>
__device__ __forceinline__ void
tj_fill_slot(T *slot, const T *a, long long aRows, long long aCols,
             long long aRs, long long aCs, long long aRow0, const T *b,
             long long bRows, long long bCols, long long bRs, long long bCs,
             long long bCol0, long long kk, int tid) {
  tj_copy_block<A_TR ? K : M, A_TR ? M : K, A_TR, P>(slot, a, aRows, aCols,
                                                     aRs, aCs, aRow0, kk, tid);
  tj_copy_block<B_TR ? N : K, B_TR ? K : N, B_TR, P>(
      slot + M * K, b, bRows, bCols, bRs, bCs, kk, bCol0, tid);
}

// The accumulator tile between the kernel's layout (thread elements
// `tile`, layout group VC over P threads) and the row-padded M x
// tj_cs_ld<N> f32 array cs, from which the fragments are read and written.
// A padding of 8 floats puts the 8 rows that a half-warp's float2 stores of
// an m16n8 or m64nN fragment touch on distinct banks, and keeps each row
// 16-byte aligned, so a layout group of 4 or more adjacent columns moves as
// float4s (one wavefront per quarter-warp; scalar accesses to a group of 8
// hit each bank 8 times).
template <int N> constexpr int tj_cs_ld = N + 8;
template <int N, int VC>
constexpr int tj_cs_width = N % VC != 0 ? 1 : VC % 4 == 0 ? 4 : VC % 2 == 0 ? 2 : 1;
template <int M, int N, int P, int VC>
__device__ __forceinline__ void tj_tile_to_rows(const float *tile, float *cs) {
  constexpr int W = tj_cs_width<N, VC>;
#pragma unroll
  for (int e = 0; e < M * N / P; e += W) {
    const int t = tj_tile_index<P, VC>(e);
    float *at = cs + t / N * tj_cs_ld<N> + t % N;
    if constexpr (W == 4)
      *reinterpret_cast<float4 *>(at) =
          make_float4(tile[e], tile[e + 1], tile[e + 2], tile[e + 3]);
    else if constexpr (W == 2)
      *reinterpret_cast<float2 *>(at) = make_float2(tile[e], tile[e + 1]);
    else
      *at = tile[e];
  }
}
template <int M, int N, int P, int VC>
__device__ __forceinline__ void tj_rows_to_tile(const float *cs, float *tile) {
  constexpr int W = tj_cs_width<N, VC>;
#pragma unroll
  for (int e = 0; e < M * N / P; e += W) {
    const int t = tj_tile_index<P, VC>(e);
    const float *at = cs + t / N * tj_cs_ld<N> + t % N;
    if constexpr (W == 4) {
      const float4 v = *reinterpret_cast<const float4 *>(at);
      tile[e] = v.x, tile[e + 1] = v.y, tile[e + 2] = v.z, tile[e + 3] = v.w;
    } else if constexpr (W == 2) {
      const float2 v = *reinterpret_cast<const float2 *>(at);
      tile[e] = v.x, tile[e + 1] = v.y;
    } else {
      tile[e] = *at;
    }
  }
}

// A dot loop's mbarriers (full, then empty, STAGES each) in `smem`, after
// the ring of STAGES slots and the accumulator's copy, which share the
// start of it.
template <int M, int N, int K, int STAGES>
__device__ __forceinline__ unsigned long long *
tj_ring_mbarriers(unsigned char *smem) {
  constexpr int RING = STAGES * (M * K + K * N) * 2, CS = M * tj_cs_ld<N> * 4;
  return reinterpret_cast<unsigned long long *>(smem +
                                                (RING > CS ? RING : CS));
}

// The K steps of a dot loop over [kBegin, kEnd).
template <int K>
__device__ __forceinline__ long long tj_k_steps(long long kBegin,
                                                long long kEnd) {
  return kEnd > kBegin ? (kEnd - kBegin + K - 1) / K : 0;
}

template <bool TRANS>
__device__ __forceinline__ void tj_ldmatrix_x4(unsigned (&r)[4],
                                               const void *src) {
  const unsigned s = tj_smem_addr(src);
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}


// out = acc + the sum over kk = kBegin, kBegin + K, ... < kEnd of
// A[aRow0 : +M, kk : +K] B[kk : +K, bCol0 : +N] (zeros outside the views),
// acc and out being this thread's elements of M x N tiles (layout group
// VC). A_TR: A's rows are contiguous (A^T of a row-major matrix); B_TR:
// B's rows are contiguous (B^T of a row-major matrix, as a linear layer's
// weight). ACC_ZERO: acc is known to be 0. `smem` holds STAGES slots of
// (M K + K N) elements and M tj_cs_ld<N> floats. All threads must call it.
template <int M, int N, int K, int STAGES, int P, int VC, bool A_TR, bool B_TR,
          bool ACC_ZERO, typename T>
__device__ void tj_dot_loop_mma(unsigned char *smem, const T *a, long long aRows,
                            long long aCols, long long aRs, long long aCs,
                            long long aRow0, const T *b, long long bRows,
                            long long bCols, long long bRs, long long bCs,
                            long long bCol0, long long kBegin, long long kEnd,
                            const float *acc, float *out) {
  constexpr int W = P / 32, WM = tj_warp_grid<M, N, W>::WM, WN = W / WM;
  constexpr int TM = M / WM, TN = N / WN, MI = TM / 16, NI = TN / 8;
  constexpr int AL = A_TR ? M : K, BL = B_TR ? K : N; // array row lengths
  constexpr int STAGE = M * K + K * N, CN = tj_cs_ld<N>;
  T *ring = reinterpret_cast<T *>(smem);
  float *cs = reinterpret_cast<float *>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm0 = warp / WN * TM, wn0 = warp % WN * TN;
  const int g = lane / 4, q = lane % 4, mat = lane / 8, row8 = lane % 8;
  // Where accumulator i of fragment (mi, ni) lies in cs.
  auto at = [&](int mi, int ni, int i) {
    return (wm0 + mi * 16 + g + i / 2 * 8) * CN + wn0 + ni * 8 + 2 * q + i % 2;
  };

  float c[MI][NI][4];
  if constexpr (ACC_ZERO) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          c[mi][ni][i] = 0.0f;
  } else {
    tj_tile_to_rows<M, N, P, VC>(acc, cs);
    __syncthreads();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          c[mi][ni][i] = cs[at(mi, ni, i)];
    __syncthreads();
  }

  const long long nk = tj_k_steps<K>(kBegin, kEnd);
  auto fill = [&](long long slot, long long kk) {
    tj_fill_slot<M, N, K, A_TR, B_TR, P>(ring + slot * STAGE, a, aRows, aCols,
                                         aRs, aCs, aRow0, b, bRows, bCols, bRs,
                                         bCs, bCol0, kk, threadIdx.x);
  };
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk)
      fill(s, kBegin + s * K);
    tj_copy_commit();
  }
  for (long long it = 0; it < nk; ++it) {
    tj_copy_wait<STAGES - 2>();
    __syncthreads(); // the slot refilled below was read in iteration it - 1
    const long long next = it + STAGES - 1;
    if (next < nk)
      fill(next % STAGES, kBegin + next * K);
    tj_copy_commit();
    const T *sa = ring + it % STAGES * STAGE, *sb = sa + M * K;
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      unsigned af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int m = wm0 + mi * 16 + mat % 2 * 8, k = ks * 16 + mat / 2 * 8;
        tj_ldmatrix_x4<A_TR>(af[mi],
                             A_TR ? sa + tj_smem_at<K, AL>(k + row8, m / 8)
                                  : sa + tj_smem_at<M, AL>(m + row8, k / 8));
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        unsigned r[4];
        if constexpr (B_TR) { // array [N][K]: rows n, chunks along k
          const int n = wn0 + nj * 16 + mat / 2 * 8, k = ks * 16 + mat % 2 * 8;
          tj_ldmatrix_x4<false>(r, sb + tj_smem_at<N, BL>(n + row8, k / 8));
        } else { // array [K][N]: rows k, chunks along n
          const int k = ks * 16 + mat % 2 * 8, n = wn0 + nj * 16 + mat / 2 * 8;
          tj_ldmatrix_x4<true>(r, sb + tj_smem_at<K, BL>(k + row8, n / 8));
        }
        bf[2 * nj][0] = r[0];
        bf[2 * nj][1] = r[1];
        bf[2 * nj + 1][0] = r[2];
        bf[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          tj_mma16816<T>(c[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  tj_copy_wait<0>();
  __syncthreads(); // the ring is free: it holds the accumulator now
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int i = 0; i < 4; i += 2)
        *reinterpret_cast<float2 *>(cs + at(mi, ni, i)) =
            make_float2(c[mi][ni][i], c[mi][ni][i + 1]);
  __syncthreads();
  tj_rows_to_tile<M, N, P, VC>(cs, out);
  __syncthreads(); // before the next call's copies reuse the ring
}
