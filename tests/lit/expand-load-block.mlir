// RUN: tilejit-opt %s --tile-expand-load-block | FileCheck %s

// A block load becomes the masked gather it stands for: row and column of
// each element from arange (e / C, e % C), added to the origin, in range of
// the view on both sides, at row * row_stride + col * col_stride.
// CHECK-LABEL: func.func @block(
// CHECK:         %[[E:.*]] = tile.arange : tensor<256xi32>
// CHECK:         arith.divsi %[[E]], %{{.*}} : tensor<256xi32>
// CHECK:         arith.remsi %[[E]], %{{.*}} : tensor<256xi32>
// CHECK:         %[[ROW:.*]] = arith.addi %{{.*}} : tensor<256xi64>
// CHECK:         %[[COL:.*]] = arith.addi %{{.*}} : tensor<256xi64>
// CHECK:         arith.cmpi sge, %[[ROW]]
// CHECK:         arith.cmpi slt, %[[ROW]]
// CHECK:         arith.cmpi sge, %[[COL]]
// CHECK:         arith.cmpi slt, %[[COL]]
// CHECK:         %[[COLIN:.*]] = arith.andi
// CHECK:         %[[MASK:.*]] = arith.andi %{{.*}}, %[[COLIN]]
// CHECK:         %[[ROWOFF:.*]] = arith.muli %[[ROW]]
// CHECK:         %[[COLOFF:.*]] = arith.muli %[[COL]]
// CHECK:         %[[OFFS:.*]] = arith.addi %[[ROWOFF]], %[[COLOFF]] : tensor<256xi64>
// CHECK:         %[[X:.*]] = tile.load %arg0[%[[OFFS]]] mask %[[MASK]] other %{{.*}} : !tile.ptr<f32>[tensor<256xi64>] mask tensor<256xi1> other f32 -> tensor<256xf32>
// CHECK:         tile.store %arg5[%{{.*}}], %[[X]]
// CHECK-NOT:     tile.load_block
func.func @block(%a: !tile.ptr<f32>, %rows: i64, %cols: i64, %r0: i64, %c0: i64, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %one = arith.constant 1 : i64
  %x = tile.load_block %a[%r0, %c0] of [%rows, %cols] strides [%cols, %one] {block_rows = 16 : i64, block_cols = 16 : i64} : !tile.ptr<f32> -> tensor<256xf32>
  %e = tile.arange : tensor<256xi32>
  tile.store %out[%e], %x : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  return
}
