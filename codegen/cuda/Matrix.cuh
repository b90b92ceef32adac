// ---- tile.dot, tile.reduce_rows, tile.broadcast_rows through shared memory ----
// Printed after the prelude into kernels that have one of them or a dot
// loop (whose mma.sync path uses tj_mma16816).
// c += a b on the tensor cores: one mma.sync m16n8k16 of bf16 or f16
// fragments into f32 (fragment layouts: PTX ISA, "Matrix Fragments for
// mma.m16n8k16").
#define TJ_MMA16816(TY)                                                        \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 "      \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "                \
               "{%0, %1, %2, %3};"                                             \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <typename T>
__device__ __forceinline__ void tj_mma16816(float (&c)[4], const unsigned (&a)[4],
                                            unsigned b0, unsigned b1) {
  if constexpr (tj_is_bf16<T>::value)
    TJ_MMA16816("bf16");
  else
    TJ_MMA16816("f16");
}
#undef TJ_MMA16816

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
      tj_mma16816<T>(c, ra, rb[0], rb[1]);
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
// dst = the R row reductions of the R x C matrix src. Where a row is whole
// groups of VS held by C / VS adjacent lanes of one warp (C / VS dividing
// 32), each thread combines its groups, the lanes combine by shuffles, and
// only the R results pass through shared memory; otherwise the matrix does,
// and each row is combined in column order.
template <int R, int C, int P, int VS, int VR, typename Op, typename T>
__device__ void tj_reduce_rows(const T *src, T *dst) {
  constexpr int lanes = C / VS;
  if constexpr (C % VS == 0 && 32 % lanes == 0) {
    T *buf = tj_rows_buffer<R, T>();
    for (int g = 0; g < R * C / P / VS; ++g) {
      T acc = src[g * VS];
      for (int j = 1; j < VS; ++j)
        acc = Op::apply(acc, src[g * VS + j]);
      for (int o = lanes / 2; o > 0; o /= 2)
        acc = Op::apply(acc, __shfl_xor_sync(0xffffffffu, acc, o));
      // Group g of thread t is group g P + t of the matrix.
      if (threadIdx.x % lanes == 0)
        buf[(g * P + int(threadIdx.x)) / lanes] = acc;
    }
    __syncthreads();
    for (int e = 0; e < R / P; ++e)
      dst[e] = buf[tj_tile_index<P, VR>(e)];
  } else {
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

