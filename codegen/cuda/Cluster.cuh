// ---- thread-block clusters: tile.cluster_reduce (sm_90) ----
// Printed after the prelude into kernels that combine over a cluster.
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
