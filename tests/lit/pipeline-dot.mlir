// RUN: tilejit-opt %s --split-input-file --tile-pipeline-dot | FileCheck %s

// A K loop of dots over two block loads becomes one tile.dot_loop over the
// loop's bounds (widened to i64), taking the loop's initial accumulator; its
// buffers join the kernel's dynamic shared memory after the existing 100
// bytes (at the next 128-byte boundary): 3 stages of (64 x 32 + 32 x 64)
// bf16 elements, or the 64 x (64 + 4) f32 accumulator, whichever is larger,
// 1024 bytes to align them and 2 mbarriers per stage.
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:    tile.shared_bytes = 25776 : i64
// CHECK-NOT:     scf.for
// CHECK:         %[[K:.*]] = arith.extsi %arg2 : i32 to i64
// CHECK:         %[[LB:.*]] = arith.extsi %c0_i32 : i32 to i64
// CHECK:         %[[UB:.*]] = arith.extsi %arg2 : i32 to i64
// CHECK:         %[[R:.*]] = tile.dot_loop %arg0[%arg4, k] of[%arg3, %[[K]]] strides[%[[K]], %c1_i64] times %arg1[k, %arg5] of[%[[K]], %arg3] strides[%c1_i64, %[[K]]] over[%[[LB]], %[[UB]]) plus %cst {k = 32 : i64, m = 64 : i64, n = 64 : i64, smem_offset = 128 : i64, stages = 3 : i64}
// CHECK:         tile.store %arg6[%{{.*}}], %[[R]]
func.func @gemm(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i32, %M: i64, %m0: i64, %n0: i64, %c: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 100 : i64} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<4096xf32>
  %k64 = arith.extsi %K : i32 to i64
  %acc = scf.for %k = %c0 to %K step %c32 iter_args(%s = %zero) -> (tensor<4096xf32>) : i32 {
    %kk = arith.extsi %k : i32 to i64
    %x = tile.load_block %a[%m0, %kk] of [%M, %k64] strides [%k64, %one] {block_rows = 64 : i64, block_cols = 32 : i64} : !tile.ptr<bf16> -> tensor<2048xbf16>
    %y = tile.load_block %b[%kk, %n0] of [%k64, %M] strides [%one, %k64] {block_rows = 32 : i64, block_cols = 64 : i64} : !tile.ptr<bf16> -> tensor<2048xbf16>
    %d = tile.dot %x, %y, %s {m = 64 : i64, n = 64 : i64, k = 32 : i64} : tensor<2048xbf16>, tensor<2048xbf16>, tensor<4096xf32> -> tensor<4096xf32>
    scf.yield %d : tensor<4096xf32>
  }
  %c0_64 = arith.constant 0 : i64
  %r = tile.arange : tensor<4096xi32>
  tile.store %c[%r], %acc : !tile.ptr<f32>[tensor<4096xi32>], tensor<4096xf32>
  return
}

// -----

// A block whose origin does not follow the loop (here A's column is fixed)
// is no dot loop: the loop stays.
// CHECK-LABEL: func.func @not_a_k_loop(
// CHECK:         scf.for
// CHECK:           tile.load_block
// CHECK:           tile.dot
// CHECK-NOT:     tile.dot_loop
func.func @not_a_k_loop(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i32, %M: i64, %m0: i64, %n0: i64, %c: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<4096xf32>
  %k64 = arith.extsi %K : i32 to i64
  %acc = scf.for %k = %c0 to %K step %c32 iter_args(%s = %zero) -> (tensor<4096xf32>) : i32 {
    %kk = arith.extsi %k : i32 to i64
    %x = tile.load_block %a[%m0, %n0] of [%M, %k64] strides [%k64, %one] {block_rows = 64 : i64, block_cols = 32 : i64} : !tile.ptr<bf16> -> tensor<2048xbf16>
    %y = tile.load_block %b[%kk, %n0] of [%k64, %M] strides [%one, %k64] {block_rows = 32 : i64, block_cols = 64 : i64} : !tile.ptr<bf16> -> tensor<2048xbf16>
    %d = tile.dot %x, %y, %s {m = 64 : i64, n = 64 : i64, k = 32 : i64} : tensor<2048xbf16>, tensor<2048xbf16>, tensor<4096xf32> -> tensor<4096xf32>
    scf.yield %d : tensor<4096xf32>
  }
  %r = tile.arange : tensor<4096xi32>
  tile.store %c[%r], %acc : !tile.ptr<f32>[tensor<4096xi32>], tensor<4096xf32>
  return
}

// -----

// Stages that do not fit next to the kernel's other arrays are cut to what
// fits: 2 stages of (128 x 64 + 64 x 128) bf16 (64 KiB; the accumulator,
// 66 KiB, 1 KiB to align them and 32 bytes of mbarriers) after 160000
// bytes.
// CHECK-LABEL: func.func @fewer_stages(
// CHECK:         tile.dot_loop
// CHECK-SAME:      stages = 2 : i64
func.func @fewer_stages(%a: !tile.ptr<bf16>, %b: !tile.ptr<bf16>, %K: i32, %M: i64, %m0: i64, %n0: i64, %c: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 8 : i64, tile.shared_bytes = 160000 : i64, tile.dot_stages = 4 : i64} {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : tensor<16384xf32>
  %k64 = arith.extsi %K : i32 to i64
  %acc = scf.for %k = %c0 to %K step %c64 iter_args(%s = %zero) -> (tensor<16384xf32>) : i32 {
    %kk = arith.extsi %k : i32 to i64
    %x = tile.load_block %a[%m0, %kk] of [%M, %k64] strides [%k64, %one] {block_rows = 128 : i64, block_cols = 64 : i64} : !tile.ptr<bf16> -> tensor<8192xbf16>
    %y = tile.load_block %b[%kk, %n0] of [%k64, %M] strides [%M, %one] {block_rows = 64 : i64, block_cols = 128 : i64} : !tile.ptr<bf16> -> tensor<8192xbf16>
    %d = tile.dot %x, %y, %s {m = 128 : i64, n = 128 : i64, k = 64 : i64} : tensor<8192xbf16>, tensor<8192xbf16>, tensor<16384xf32> -> tensor<16384xf32>
    scf.yield %d : tensor<16384xf32>
  }
  %r = tile.arange : tensor<16384xi32>
  tile.store %c[%r], %acc : !tile.ptr<f32>[tensor<16384xi32>], tensor<16384xf32>
  return
}
