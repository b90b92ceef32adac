// RUN: tilejit-opt %s --tile-specialize | FileCheck %s

// CHECK-LABEL: func.func @k
// CHECK-NOT: tile.constexpr "
// CHECK: arith.constant 4096 : i32
func.func @k(%out: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 4 : i64,
                                              tile.constexprs = {BLOCK_SIZE = 4096 : i64}} {
  %b = tile.constexpr "BLOCK_SIZE" : i32
  %c0 = arith.constant 0 : i32
  tile.store %out[%c0], %b : !tile.ptr<i32>[i32], i32
  return
}
