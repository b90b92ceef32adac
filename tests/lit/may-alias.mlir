// RUN: tilejit-opt %s --tile-assign-layout --tile-lower-to-simt | FileCheck %s

// A gradient written in place over its input: the tile.may_alias marks on the
// two pointer arguments survive the lowering, for the emitter to leave them
// without __restrict__.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME:      %arg0: !tile.ptr<f32> {tile.may_alias}
// CHECK-SAME:      %arg1: !tile.ptr<f32> {tile.may_alias}
// CHECK-SAME:      %arg2: !tile.ptr<f32>)
// CHECK:         simt.load %arg0
// CHECK:         simt.store %arg1
func.func @in_place(%x: !tile.ptr<f32> {tile.may_alias}, %g: !tile.ptr<f32> {tile.may_alias}, %s: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %a = tile.arange : tensor<64xi32>
  %v = tile.load %x[%a] : !tile.ptr<f32>[tensor<64xi32>] -> tensor<64xf32>
  tile.store %g[%a], %v : !tile.ptr<f32>[tensor<64xi32>], tensor<64xf32>
  return
}
