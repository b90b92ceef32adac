// RUN: tilejit-opt %s --split-input-file --simt-tensor-maps | FileCheck %s

// A's view (M x K, columns contiguous) and B's (K x 4096, rows contiguous,
// so kept as B^T) become two maps: [pointer, element bytes, inner, outer and
// stride as (parameter, constant), box inner, box outer, swizzle bytes].
// Widened i32 parameters count as the parameter; the constant 4096 is kept.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:    simt.tensor_maps = [array<i64: 0, 2, 3, 0, 2, 0, 4, 0, 64, 128, 128>, array<i64: 1, 2, 3, 0, -1, 4096, 5, 0, 64, 128, 128>]
// CHECK:         simt.dot_loop {{.*}}tensor_maps = 0 : i64
func.func @gemm(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %M: i32, %K: i32, %lda: i64, %ldb: i64, %m0: i64, %n0: i64) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c4096 = arith.constant 4096 : i64
  %m = arith.extsi %M : i32 to i64
  %k = arith.extsi %K : i32 to i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%m0, k] of [%m, %k] strides [%lda, %c1] times %b[k, %n0] of [%k, %c4096] strides [%c1, %ldb] over [%c0, %k) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// K = 32: rows of 64 bytes, in the 64-byte swizzle; the second loop's maps
// follow the first's.
// CHECK-LABEL: func.func @two_loops(
// CHECK-SAME:    simt.tensor_maps = [array<i64: 0, 2, 3, 0, 2, 0, 4, 0, 32, 128, 64>, array<i64: 1, 2, 4, 0, 3, 0, 5, 0, 64, 32, 128>, array<i64: 0, 2, 3, 0, 2, 0, 4, 0, 32, 128, 64>, array<i64: 1, 2, 4, 0, 3, 0, 5, 0, 64, 32, 128>]
// CHECK:         simt.dot_loop {{.*}}tensor_maps = 0 : i64
// CHECK:         simt.dot_loop {{.*}}tensor_maps = 2 : i64
func.func @two_loops(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %M: i64, %K: i64, %lda: i64, %ldb: i64, %m0: i64, %n0: i64) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %lda] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 32 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<f16>, !tile.ptr<f16>, vector<64xf32> -> vector<64xf32>
  %s = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %lda] strides [%ldb, %c1] over [%c0, %K) plus %r {k = 32 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<f16>, !tile.ptr<f16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// No maps: a view without a contiguous dimension of constant stride 1; an
// extent computed in the kernel; a pointer offset in the kernel; 128 x 256
// accumulators over 128 threads (256 each, more than wgmma's registers
// hold).
// CHECK-LABEL: func.func @none(
// CHECK-NOT:     simt.tensor_maps
// CHECK-NOT:     tensor_maps =
func.func @none(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %M: i64, %K: i64, %lda: i64, %ldb: i64, %m0: i64, %n0: i64) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r0 = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%lda, %ldb] times %b[k, %n0] of [%K, %M] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  %half = arith.divsi %M, %lda : i64
  %r1 = simt.dot_loop %a[%m0, k] of [%half, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %M] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  %a2 = tile.addptr %a, %lda : !tile.ptr<bf16>, i64
  %r2 = simt.dot_loop %a2[%m0, k] of [%M, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %M] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @too_many_accumulators(
// CHECK-NOT:     tensor_maps
func.func @too_many_accumulators(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %M: i64, %K: i64, %lda: i64, %ldb: i64, %m0: i64, %n0: i64) attributes {tile.kernel, simt.threads = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<256xf32>
  %r = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %M] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 256 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<256xf32> -> vector<256xf32>
  return
}

// -----

// The kernel stores into B's array: the copy engine would not see those
// stores, so the loop keeps cp.async.
// CHECK-LABEL: func.func @writes_b(
// CHECK-NOT:     tensor_maps
func.func @writes_b(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %M: i64, %K: i64, %lda: i64, %ldb: i64, %m0: i64, %n0: i64) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %offs = arith.constant dense<0> : vector<8xi64>
  %zero = arith.constant dense<0.0> : vector<8xbf16>
  simt.store %b[%offs], %zero : !tile.ptr<bf16>[vector<8xi64>], vector<8xbf16>
  %r = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%lda, %c1] times %b[k, %n0] of [%K, %M] strides [%ldb, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}
