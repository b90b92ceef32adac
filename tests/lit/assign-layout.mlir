// RUN: tilejit-opt %s --tile-assign-layout | FileCheck %s

// simt.threads = 32 * tile.num_warps on every kernel; the body is unchanged.

// CHECK-LABEL: func.func @one_warp(
// CHECK-SAME:      simt.threads = 32 : i64, simt.vec = 4 : i64
// CHECK:         tile.arange : tensor<64xi32>
func.func @one_warp(%p: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<64xi32>
  tile.store %p[%a], %a : !tile.ptr<i32>[tensor<64xi32>], tensor<64xi32>
  return
}

// CHECK-LABEL: func.func @four_warps(
// CHECK-SAME:      simt.threads = 128 : i64, simt.vec = 1 : i64
func.func @four_warps(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  return
}

// CHECK-LABEL: func.func @eight_warps(
// CHECK-SAME:      simt.threads = 256 : i64
func.func @eight_warps(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 8 : i64, tile.constexprs = {BLOCK_SIZE = 4096 : i64}} {
  return
}

// CHECK-LABEL: func.func @thirty_two_warps(
// CHECK-SAME:      simt.threads = 1024 : i64
func.func @thirty_two_warps(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 32 : i64} {
  return
}

// Not a kernel: no layout.
// CHECK-LABEL: func.func @helper(
// CHECK-NOT:     simt.threads
// CHECK:         return
func.func @helper(%a: i32) -> i32 {
  return %a : i32
}

// simt.vec: 16 bytes of the narrowest accessed type (each tile's group is
// capped by its K = N / P when lowered).
// CHECK-LABEL: func.func @bf16_groups(
// CHECK-SAME:      simt.threads = 128 : i64, simt.vec = 8 : i64
func.func @bf16_groups(%p: !tile.ptr<bf16>, %q: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %a = tile.arange : tensor<4096xi32>
  %x = tile.load %p[%a] : !tile.ptr<bf16>[tensor<4096xi32>] -> tensor<4096xbf16>
  %y = arith.extf %x : tensor<4096xbf16> to tensor<4096xf32>
  tile.store %q[%a], %y : !tile.ptr<f32>[tensor<4096xi32>], tensor<4096xf32>
  return
}

// A row op whose rows lie within a thread's group of 4 (f32): the vector of
// row entries gets group 4 / cols, so each entry stays with its row's thread.
// Rows of 8 do not fit a group of 4: no entry for them.
// CHECK-LABEL: func.func @row_groups(
// CHECK-SAME:      simt.groups = array<i64: 256, 2>
// CHECK-SAME:      simt.vec = 4 : i64
func.func @row_groups(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<512xi32>
  %x = tile.load %p[%a] : !tile.ptr<f32>[tensor<512xi32>] -> tensor<512xf32>
  %m = tile.reduce_rows max %x {cols = 2 : i64} : tensor<512xf32> -> tensor<256xf32>
  %s = tile.reduce_rows sum %x {cols = 8 : i64} : tensor<512xf32> -> tensor<64xf32>
  return
}
