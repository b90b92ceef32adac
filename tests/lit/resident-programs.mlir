// RUN: tilejit-opt %s --split-input-file --simt-resident-programs | FileCheck %s

// A GEMM's program: its A row and B column follow from the program ids and
// a parameter, its K range from a parameter; the loop accumulates from
// zero and the copy engine feeds it. It becomes resident.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:    simt.resident
// CHECK:         simt.dot_loop {{.*}}resident
func.func @gemm(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %M: i64, %N: i64, %K: i64) attributes {tile.kernel, tile.resident, simt.threads = 256 : i64, simt.tensor_maps = []} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %pid = simt.block_id 0 : i32
  %pidy = simt.block_id 1 : i32
  %i = arith.extsi %pid : i32 to i64
  %j = arith.extsi %pidy : i32 to i64
  %m0 = arith.muli %i, %c128 : i64
  %n0 = arith.muli %j, %c128 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%m0, k] of [%M, %K] strides [%K, %c1] times %b[k, %n0] of [%K, %N] strides [%N, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64, tensor_maps = 0 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// Not asked for (no tile.resident), no tensor maps, an accumulator that is
// not zero, or an A row loaded from memory: left as it is.
// CHECK-LABEL: func.func @not_asked(
// CHECK-NOT:     simt.resident
// CHECK:         simt.dot_loop
// CHECK-NOT:     resident
func.func @not_asked(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i64) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%c0, k] of [%K, %K] strides [%K, %c1] times %b[k, %c0] of [%K, %K] strides [%K, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64, tensor_maps = 0 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @no_maps(
// CHECK-NOT:     simt.resident
// CHECK:         simt.dot_loop
// CHECK-NOT:     resident
func.func @no_maps(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i64) attributes {tile.kernel, tile.resident, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%c0, k] of [%K, %K] strides [%K, %c1] times %b[k, %c0] of [%K, %K] strides [%K, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @loaded_row(
// CHECK-NOT:     simt.resident
// CHECK:         simt.dot_loop
// CHECK-NOT:     resident
func.func @loaded_row(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %rows: !tile.ptr<i64>, %K: i64) attributes {tile.kernel, tile.resident, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %i0 = arith.constant 0 : i32
  %m0 = simt.load %rows[%i0] : !tile.ptr<i64>[i32] -> i64
  %acc = arith.constant dense<0.0> : vector<64xf32>
  %r = simt.dot_loop %a[%m0, k] of [%K, %K] strides [%K, %c1] times %b[k, %c0] of [%K, %K] strides [%K, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64, tensor_maps = 0 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @nonzero_acc(
// CHECK-NOT:     simt.resident
// CHECK:         simt.dot_loop
// CHECK-NOT:     resident
func.func @nonzero_acc(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i64, %acc: vector<64xf32>) attributes {tile.kernel, tile.resident, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %r = simt.dot_loop %a[%c0, k] of [%K, %K] strides [%K, %c1] times %b[k, %c0] of [%K, %K] strides [%K, %c1] over [%c0, %K) plus %acc {k = 64 : i64, m = 128 : i64, n = 128 : i64, smem_offset = 0 : i64, stages = 4 : i64, tensor_maps = 0 : i64} : !tile.ptr<bf16>, !tile.ptr<bf16>, vector<64xf32> -> vector<64xf32>
  return
}
