// ---- tile.dot_loop on sm_90a, blocks copied by the tensor memory accelerator ----
// Where the launch encoded tensor maps of both views (simt-tensor-maps,
// tilejit/TensorMap.h), thread 0 copies each ring slot with
// cp.async.bulk.tensor: one copy per 64-element panel of each block, which
// the copy engine swizzles into the layout of tj_smem_at (wgmma's) and fills
// with zeros outside the view. No thread spends issue slots on copies, so
// every warpgroup multiplies: the G = P / 128 warpgroups split the M rows,
// each keeping one wgmma batch in flight. A slot's `full` mbarrier completes
// when the copy engine has written its bytes (expect_tx); its `empty`
// mbarrier when each warpgroup's products that read it are done (G
// arrivals), after which thread 0 refills it STAGES stages ahead.

// A CUtensorMap (cuda.h), as the launch passes it: 128 opaque bytes.
struct __align__(64) tj_tensor_map {
  unsigned long long bits[16];
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void tj_mbar_expect_tx(unsigned long long *bar,
                                                  unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
          tj_smem_addr(bar)),
      "r"(bytes)
      : "memory");
}

// Copies the R x L block whose array element (s, e) is the map's element
// (along0 + e, fixed0 + s) (inner, outer coordinates) into dst, laid out as
// tj_smem_at<R, L>: one copy per 64-element column panel of R rows.
template <int R, int L, typename T>
__device__ __forceinline__ void tj_tma_block(T *dst, const tj_tensor_map *map,
                                             unsigned long long *bar,
                                             long long along0,
                                             long long fixed0) {
  constexpr int W = L < 64 ? L : 64;
#pragma unroll
  for (int p = 0; p < L / W; ++p)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                 ".mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
                     "r"(tj_smem_addr(dst + p * R * W)),
                 "l"(map), "r"(static_cast<int>(along0 + p * W)),
                 "r"(static_cast<int>(fixed0)), "r"(tj_smem_addr(bar))
                 : "memory");
}

// One ring slot's copies: A's M x K block at row aRow0 and B's K x N block
// at column bCol0, from K index kk, completing on `bar` (its expected bytes
// set first).
template <int M, int N, int K, bool A_TR, bool B_TR, typename T>
__device__ __forceinline__ void
tj_tma_stage(T *slot, const tj_tensor_map *aMap, const tj_tensor_map *bMap,
             unsigned long long *bar, long long aRow0, long long bCol0,
             long long kk) {
  T *sa = slot, *sb = slot + M * K;
  tj_mbar_expect_tx(bar, (M * K + K * N) * sizeof(T));
  if constexpr (A_TR) // array [K][M]: rows of A's view are contiguous
    tj_tma_block<K, M>(sa, aMap, bar, aRow0, kk);
  else
    tj_tma_block<M, K>(sa, aMap, bar, kk, aRow0);
  if constexpr (B_TR) // array [N][K]
    tj_tma_block<N, K>(sb, bMap, bar, kk, bCol0);
  else
    tj_tma_block<K, N>(sb, bMap, bar, bCol0, kk);
}

template <int M, int N, int K, int P> struct tj_wgmma_tma_fits {
  static constexpr bool value =
      tj_wgmma_fits<M, N, K, P>::value && M * N / P <= 128 && M <= 256;
};

// tj_dot_loop (see tj_dot_loop_mma) with the blocks copied through the
// tensor maps aMap (of A's view) and bMap (of B's); `smem` is 1024-byte
// aligned and has 16 STAGES bytes for the mbarriers after the ring and the
// accumulator's copy.
template <int M, int N, int K, int STAGES, int P, int VC, bool A_TR, bool B_TR,
          bool ACC_ZERO, typename T>
__device__ void
tj_dot_loop_wgmma_tma(unsigned char *smem, const tj_tensor_map *aMap,
                      long long aRow0, const tj_tensor_map *bMap,
                      long long bCol0, long long kBegin, long long kEnd,
                      const float *acc, float *out) {
  constexpr int G = P / 128, MW = M / G, MI = MW / 64, STAGE = M * K + K * N;
  T *ring = reinterpret_cast<T *>(smem);
  float *cs = reinterpret_cast<float *>(smem);
  unsigned long long *full = tj_ring_mbarriers<M, N, K, STAGES>(smem);
  unsigned long long *empty = full + STAGES;
  const int wg = threadIdx.x / 128;
  const long long nk = tj_k_steps<K>(kBegin, kEnd);
  // Thread 0 only: the copies of stage `it` into its slot.
  auto fill = [&](long long it) {
    const int s = it % STAGES;
    tj_tma_stage<M, N, K, A_TR, B_TR>(ring + s * STAGE, aMap, bMap, full + s,
                                      aRow0, bCol0, kBegin + it * K);
  };

  float d[MI][N / 2];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tj_mbar_init(full + s, 1);
      tj_mbar_init(empty + s, G);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (!ACC_ZERO) {
    tj_tile_to_rows<M, N, P, VC>(acc, cs);
    __syncthreads();
    tj_wgmma_acc_load<N, MI>(cs, wg * MW, d);
  }
  // Plain stores into the ring (an earlier call's accumulator copy, the
  // one above) come before the copy engine's writes.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0)
    for (long long it = 0; it < nk && it < STAGES; ++it)
      fill(it);

  for (long long it = 0; it < nk; ++it) {
    const int s = it % STAGES;
    tj_mbar_wait(full + s, (it / STAGES) & 1);
    const T *sa = ring + s * STAGE, *sb = sa + M * K;
    tj_wgmma_slot<M, N, K, MI, A_TR, B_TR, ACC_ZERO>(sa, sb, wg * MW, d,
                                                     it == 0);
    // The batch before this one is done: its slot may be refilled once
    // every warpgroup's is.
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    if (const long long done = it - 1; done >= 0) {
      if (threadIdx.x % 128 == 0)
        tj_mbar_arrive(empty + done % STAGES);
      if (threadIdx.x == 0 && done + STAGES < nk) {
        tj_mbar_wait(empty + done % STAGES, (done / STAGES) & 1);
        fill(done + STAGES);
      }
      __syncwarp();
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  // Every copy has landed and been read.
  tj_wgmma_finish<M, N, P, VC, MI, STAGES>(cs, wg * MW, d, ACC_ZERO && nk == 0,
                                           true, out, full);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
