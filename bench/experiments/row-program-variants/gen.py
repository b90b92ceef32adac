#!/usr/bin/env python3
"""Variants of tilejit's emitted lce_logits_grad for a one-off timing harness.

Usage (stop 10, 2026-11-29; results in bench/results/2026-11-29-lce-session10.md):
  # Emit the plain cross-entropy kernel (features off, bf16 logits in place)
  # for BLOCK_SIZE/num_warps 2048/8, 4096/16, 8192/32 into lg_<BLOCK>.cu, e.g.
  #   tilejit compile lce_logits_grad --dtype bf16 --vocab 128256 \
  #     --set BLOCK_SIZE=2048 --set num_warps=8 --emit=cuda -o lg_2048.cu
  # (the feature switches were set off in lceProblemFlags for the dump), then
  python3 gen.py && nvcc -O3 -arch=sm_90 -o lgexp main.cu && ./lgexp
Variants: `ev` L2 eviction hints (evict_last in pass 1, evict_first and
streaming stores in pass 2), `pfN` a cp.async.bulk.prefetch.L2 of the tile N
steps ahead in pass 1, `lbN` __launch_bounds__(threads, N).
"""
import re

HINTS = r'''
__device__ __forceinline__ void tj_prefetch_l2(const void *p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");
}
template <int Bytes, typename T>
__device__ __forceinline__ void tj_vload_last(T *dst, const T *src) {
  uint4 b;
  asm volatile("{.reg .b64 p; createpolicy.fractional.L2::evict_last.b64 p, 1.0; ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], p;}" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(src));
  memcpy(dst, &b, 16);
}
template <int Bytes, typename T>
__device__ __forceinline__ void tj_vload_first(T *dst, const T *src) {
  uint4 b;
  asm volatile("{.reg .b64 p; createpolicy.fractional.L2::evict_first.b64 p, 1.0; ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], p;}" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(src));
  memcpy(dst, &b, 16);
}
template <int Bytes, typename T>
__device__ __forceinline__ void tj_vstore_cs(T *dst, const T *src) {
  uint4 b; memcpy(&b, src, 16);
  asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(dst), "r"(b.x), "r"(b.y), "r"(b.z), "r"(b.w) : "memory");
}
'''

out, names = [], []
for blk, warps in [(2048, 8), (4096, 16), (8192, 32)]:
    s = '\n'.join(l for l in open('lg_%d.cu' % blk).read().split('\n')
                  if not l.startswith('#line'))
    head, kern = s.split('extern "C" __global__', 1)
    kern = 'extern "C" __global__' + kern
    if not out:
        out += [head, HINTS]
    loops = [m.start() for m in re.finditer(r'\n  for \(int v\d+ = ', kern)]
    # Two passes, each whole steps + a partial one (stop 20's forTiles adds
    # a loop of the tail's whole tiles where UNROLL > 1).
    assert len(loops) in (4, 6), len(loops)
    pass2 = loops[len(loops) // 2]

    def variant(tag, ev=False, lb=None, pf=None):
        k = kern
        if ev:
            k = (k[:pass2].replace('tj_vload<16>', 'tj_vload_last<16>') +
                 k[pass2:].replace('tj_vload<16>', 'tj_vload_first<16>')
                 .replace('tj_vstore<16>', 'tj_vstore_cs<16>'))
        if pf:  # v41: the row's logits; v10: V
            m = re.search(r'\n  for \(int (v\d+) = (v\d+); \1 < (v\d+); \1 \+= (v\d+)\) \{\n', k)
            i, _, _, step = m.groups()
            ins = ('    if (threadIdx.x == 0) { int a = %s + %d * %s; if (a < v10) '
                   '{ int n = min(%s, v10 - a) & ~7; if (n) tj_prefetch_l2(v41 + a, n * 2); } }\n'
                   % (i, pf, step, step))
            k = k[:m.end()] + ins + k[m.end():]
        if lb:
            k = k.replace('__launch_bounds__(%d)' % (warps * 32),
                          '__launch_bounds__(%d, %d)' % (warps * 32, lb), 1)
        name = 'k%d_%s' % (blk, tag)
        names.append((name, warps * 32))
        return k.replace('lce_logits_grad(', name + '(', 1)

    out += [variant('base'), variant('ev', ev=True), variant('pf2', pf=2),
            variant('ev_pf2', ev=True, pf=2)]
    if blk == 2048:
        out += [variant('lb6', lb=6), variant('ev_lb6', ev=True, lb=6),
                variant('ev_pf2_lb6', ev=True, lb=6, pf=2)]
open('kernels.cuh', 'w').write(''.join(out))
open('list.inc', 'w').write(',\n'.join('{"%s", %s, %d}' % (n, n, t) for n, t in names))
