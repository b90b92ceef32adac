// ---- tile.dot_loop in a resident program (sm_90a, tensor maps) ----
// A kernel that simt-resident-programs made resident runs its programs in
// turn in each launched block. Its dot loop keeps the ring and the
// mbarriers from one program to the next (`ring` counts the stages filled,
// by thread 0, and used, by every thread), and once the accumulator has
// passed through shared memory (over the ring, as in a program of its own)
// thread 0 fills the first stages of the program that comes next (`next`:
// its A row, B column and K range): they land while this program runs its
// epilogue, and the next one starts without waiting for its first blocks
// or initializing mbarriers.

struct tj_ring_state {
  long long filled = 0, used = 0;
  bool ready = false;
};
struct tj_dot_next {
  bool has;
  long long aRow0, bCol0, kBegin, kEnd;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int M, int N, int K, int STAGES, int P, int VC, bool A_TR, bool B_TR,
          typename T>
__device__ __forceinline__ void
tj_dot_loop_resident(unsigned char *smem, const tj_tensor_map *aMap,
                     long long aRow0, const tj_tensor_map *bMap,
                     long long bCol0, long long kBegin, long long kEnd,
                     float *out, tj_ring_state &ring, const tj_dot_next &next) {
  constexpr int G = P / 128, MW = M / G, MI = MW / 64, STAGE = M * K + K * N;
  T *slots = reinterpret_cast<T *>(smem);
  float *cs = reinterpret_cast<float *>(smem);
  unsigned long long *full = tj_ring_mbarriers<M, N, K, STAGES>(smem);
  unsigned long long *empty = full + STAGES;
  const int wg = threadIdx.x / 128;
  const long long nk = tj_k_steps<K>(kBegin, kEnd);
  const long long base = ring.used;
  // Thread 0 only: fills global stage f (of this program, or from
  // base + nk on, of the next) into its slot once the stage that held the
  // slot before has been used by every warpgroup.
  auto fill = [&](long long f) {
    const int s = f % STAGES;
    if (f >= STAGES)
      tj_mbar_wait(empty + s, (f / STAGES - 1) & 1);
    const bool own = f < base + nk;
    const long long kk =
        own ? kBegin + (f - base) * K : next.kBegin + (f - base - nk) * K;
    tj_tma_stage<M, N, K, A_TR, B_TR>(slots + s * STAGE, aMap, bMap,
                                      full + s, own ? aRow0 : next.aRow0,
                                      own ? bCol0 : next.bCol0, kk);
  };
  auto fillUpTo = [&](long long upTo) {
    if (threadIdx.x == 0)
      for (; ring.filled < upTo; ++ring.filled)
        fill(ring.filled);
  };

  if (!ring.ready) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        tj_mbar_init(full + s, 1);
        tj_mbar_init(empty + s, G);
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    ring.ready = true;
    __syncthreads();
  }
  // The first stages, unless the program before filled them.
  fillUpTo(base + (nk < STAGES ? nk : STAGES));

  float d[MI][N / 2];
  for (long long it = 0; it < nk; ++it) {
    const long long g = base + it;
    const int s = g % STAGES;
    tj_mbar_wait(full + s, (g / STAGES) & 1);
    const T *sa = slots + s * STAGE, *sb = sa + M * K;
    tj_wgmma_slot<M, N, K, MI, A_TR, B_TR, true>(sa, sb, wg * MW, d, it == 0);
    // The batch before this one is done: its slot may be refilled once
    // every warpgroup's is.
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    if (it > 0) {
      if (threadIdx.x % 128 == 0)
        tj_mbar_arrive(empty + (g - 1) % STAGES);
      fillUpTo(g + STAGES < base + nk ? g + STAGES : base + nk);
      __syncwarp();
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  if (nk > 0 && threadIdx.x % 128 == 0)
    tj_mbar_arrive(empty + (base + nk - 1) % STAGES);
  ring.used = base + nk;

  // Every copy has landed and been read: the ring holds the accumulator.
  __syncthreads();
  tj_wgmma_acc_store<N, MI>(cs, wg * MW, d, nk == 0);
  __syncthreads();
  tj_rows_to_tile<M, N, P, VC>(cs, out);
  // The copies below overwrite what this thread read through the generic
  // proxy.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (next.has) {
    const long long nn = tj_k_steps<K>(next.kBegin, next.kEnd);
    fillUpTo(base + nk + (nn < STAGES ? nn : STAGES));
  }
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
