// ---- tile.dot_loop's entry point ----
// out = acc + the sum over kk = kBegin, kBegin + K, ... < kEnd of
// A[aRow0 : +M, kk : +K] B[kk : +K, bCol0 : +N] (zeros outside the views;
// see tj_dot_loop_mma). `smem` has 1024 bytes of room to align the ring,
// and 16 STAGES bytes for mbarriers. On sm_90a: with tensor maps of both
// views (aMap and bMap not null), the copy engine fills the ring and every
// warpgroup multiplies (in a resident program, `ring` not null, the ring
// carries over to the next program, whose first stages `next` describes);
// else SPECIALIZE splits 8 warps into a producer and a consumer warpgroup
// where the tile allows it.
template <int M, int N, int K, int STAGES, int P, int VC, bool A_TR, bool B_TR,
          bool ACC_ZERO, bool SPECIALIZE, typename T>
__device__ __forceinline__ void
tj_dot_loop(unsigned char *smem, const T *a, long long aRows, long long aCols,
            long long aRs, long long aCs, long long aRow0, const T *b,
            long long bRows, long long bCols, long long bRs, long long bCs,
            long long bCol0, long long kBegin, long long kEnd,
            const float *acc, float *out, const tj_tensor_map *aMap,
            const tj_tensor_map *bMap, tj_ring_state *ring = nullptr,
            const tj_dot_next *next = nullptr) {
  const unsigned s = tj_smem_addr(smem);
  smem += (1024 - s % 1024) % 1024;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (ACC_ZERO && tj_wgmma_tma_fits<M, N, K, P>::value)
    if (aMap && ring) {
      tj_dot_loop_resident<M, N, K, STAGES, P, VC, A_TR, B_TR, T>(
          smem, aMap, aRow0, bMap, bCol0, kBegin, kEnd, out, *ring, *next);
      return;
    }
  if constexpr (tj_wgmma_tma_fits<M, N, K, P>::value)
    if (aMap) {
      tj_dot_loop_wgmma_tma<M, N, K, STAGES, P, VC, A_TR, B_TR, ACC_ZERO, T>(
          smem, aMap, aRow0, bMap, bCol0, kBegin, kEnd, acc, out);
      return;
    }
  if constexpr (SPECIALIZE && tj_wgmma_ws_fits<M, N, K, P>::value)
    tj_dot_loop_wgmma_ws<M, N, K, STAGES, VC, A_TR, B_TR, ACC_ZERO>(
        smem, a, aRows, aCols, aRs, aCs, aRow0, b, bRows, bCols, bRs, bCs,
        bCol0, kBegin, kEnd, acc, out);
  else if constexpr (tj_wgmma_fits<M, N, K, P>::value)
    tj_dot_loop_wgmma<M, N, K, STAGES, P, VC, A_TR, B_TR, ACC_ZERO>(
        smem, a, aRows, aCols, aRs, aCs, aRow0, b, bRows, bCols, bRs, bCs,
        bCol0, kBegin, kEnd, acc, out);
  else
#endif
    tj_dot_loop_mma<M, N, K, STAGES, P, VC, A_TR, B_TR, ACC_ZERO>(
        smem, a, aRows, aCols, aRs, aCs, aRow0, b, bRows, bCols, bRs, bCs,
        bCol0, kBegin, kEnd, acc, out);
}
