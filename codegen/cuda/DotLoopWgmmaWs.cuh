// ---- tile.dot_loop on sm_90a with a producer and a consumer warpgroup ----
// For a program of 8 warps (DOT_SPECIALIZE = 1): warpgroup 0 only copies
// blocks into the ring, warpgroup 1 only multiplies, so neither waits on the
// other's instructions. They meet on two mbarriers per slot: `full` (the
// producers' copies of a slot have landed, 128 arrivals) and `empty` (the
// consumer's products that read a slot are done, 128 arrivals). A producer
// waits for its own copies of a stage (cp.async.wait_group, STAGES - 1
// stages behind the newest), makes them visible to the tensor cores
// (fence.proxy.async) and arrives on the stage's `full`.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void tj_mbar_init(unsigned long long *bar,
                                             unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(
                   tj_smem_addr(bar)),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void tj_mbar_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                   tj_smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void tj_mbar_wait(unsigned long long *bar,
                                             unsigned parity) {
  asm volatile("{\n.reg .pred done;\nwait:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait;\n}\n" ::"r"(tj_smem_addr(bar)),
               "r"(parity)
               : "memory");
}

// The end of a dot loop on mbarriers, once its products are done: the
// accumulators of the warpgroups that hold them (`holds`, rows from m0)
// pass through cs into the kernel's layout (out), and the STAGES `full`
// and STAGES `empty` mbarriers from `bars` are invalidated for the next
// call to initialize anew.
template <int M, int N, int P, int VC, int MI, int STAGES>
__device__ __forceinline__ void
tj_wgmma_finish(float *cs, int m0, const float (&d)[MI][N / 2], bool zero,
                bool holds, float *out, unsigned long long *bars) {
  __syncthreads(); // the ring is free: it holds the accumulator now
  if (holds)
    tj_wgmma_acc_store<N, MI>(cs, m0, d, zero);
  __syncthreads();
  tj_rows_to_tile<M, N, P, VC>(cs, out);
  __syncthreads(); // before the next call's copies reuse the ring
  if (threadIdx.x == 0)
    for (int s = 0; s < 2 * STAGES; ++s)
      asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(
                       tj_smem_addr(bars + s))
                   : "memory");
}

template <int M, int N, int K, int P> struct tj_wgmma_ws_fits {
  static constexpr bool value = P == 256 && (M == 64 || M == 128) &&
                                (N == 64 || N == 128 || N == 256) &&
                                M * N / 256 <= 64 &&
                                (K == 16 || K == 32 || K == 64);
};

// tj_dot_loop (see tj_dot_loop_mma) with 8 warps split into a producer and
// a consumer warpgroup; `smem` is 1024-byte aligned and has 16 STAGES bytes
// for the mbarriers after the ring and the accumulator's copy.
template <int M, int N, int K, int STAGES, int VC, bool A_TR, bool B_TR,
          bool ACC_ZERO, typename T>
__device__ void
tj_dot_loop_wgmma_ws(unsigned char *smem, const T *a, long long aRows,
                     long long aCols, long long aRs, long long aCs,
                     long long aRow0, const T *b, long long bRows,
                     long long bCols, long long bRs, long long bCs,
                     long long bCol0, long long kBegin, long long kEnd,
                     const float *acc, float *out) {
  constexpr int P = 256, MI = M / 64, STAGE = M * K + K * N;
  constexpr int AHEAD = STAGES - 1;
  T *ring = reinterpret_cast<T *>(smem);
  float *cs = reinterpret_cast<float *>(smem);
  unsigned long long *full = tj_ring_mbarriers<M, N, K, STAGES>(smem);
  unsigned long long *empty = full + STAGES;
  const bool producer = threadIdx.x < 128;
  const int t = threadIdx.x % 128;
  float d[MI][N / 2];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tj_mbar_init(full + s, 128);
      tj_mbar_init(empty + s, 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (!ACC_ZERO) {
    tj_tile_to_rows<M, N, P, VC>(acc, cs);
    __syncthreads();
    if (!producer)
      tj_wgmma_acc_load<N, MI>(cs, 0, d);
  }
  __syncthreads(); // the barriers are set up and the ring is free

  const long long nk = tj_k_steps<K>(kBegin, kEnd);
  if (producer) {
    for (long long it = 0; it < nk + AHEAD; ++it) {
      // First the stage whose copies are due, so that the consumer can free
      // the slot waited for below (AHEAD = STAGES - 1 stages in flight).
      if (const long long j = it - AHEAD; j >= 0) {
        tj_copy_wait<AHEAD - 1>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        tj_mbar_arrive(full + j % STAGES);
      }
      if (it < nk) {
        const int s = it % STAGES;
        if (it >= STAGES) // the products of stage it - STAGES are done
          tj_mbar_wait(empty + s, (it / STAGES - 1) & 1);
        tj_fill_slot<M, N, K, A_TR, B_TR, 128>(
            ring + s * STAGE, a, aRows, aCols, aRs, aCs, aRow0, b, bRows,
            bCols, bRs, bCs, bCol0, kBegin + it * K, t);
      }
      tj_copy_commit();
    }
  } else {
    for (long long it = 0; it < nk; ++it) {
      const int s = it % STAGES;
      tj_mbar_wait(full + s, (it / STAGES) & 1);
      const T *sa = ring + s * STAGE, *sb = sa + M * K;
      tj_wgmma_slot<M, N, K, MI, A_TR, B_TR, ACC_ZERO>(sa, sb, 0, d, it == 0);
      // The batch before this one is done: its slot may be refilled.
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (it > 0)
        tj_mbar_arrive(empty + (it - 1) % STAGES);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  tj_wgmma_finish<M, N, P, VC, MI, STAGES>(cs, 0, d, ACC_ZERO && nk == 0,
                                           !producer, out, full);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
