// RUN: tilejit-opt %s --tile-expand-softmax | FileCheck %s

// The fold: one exp per element, of the smaller of m and x less the other.
// CHECK-LABEL: func.func @fold_and_total(
// CHECK:         %[[BIG:.*]] = arith.cmpf ogt, %[[X:.*]], %[[M:.*]] : tensor<256xf32>
// CHECK:         %[[MX:.*]] = arith.subf %[[M]], %[[X]]
// CHECK:         %[[XM:.*]] = arith.subf %[[X]], %[[M]]
// CHECK:         %[[LOW:.*]] = arith.select %[[BIG]], %[[MX]], %[[XM]]
// CHECK:         %[[NINF:.*]] = arith.cmpf oeq, %[[X]]
// CHECK:         %[[EXP:.*]] = math.exp %[[LOW]] fastmath<afn>
// CHECK:         %[[E:.*]] = arith.select %[[NINF]], %{{.*}}, %[[EXP]]
// CHECK:         %[[DE:.*]] = arith.mulf %[[D:.*]], %[[E]]
// CHECK:         %[[RESC:.*]] = arith.addf %[[DE]], %{{.*}}
// CHECK:         %[[PLUS:.*]] = arith.addf %[[D]], %[[E]]
// CHECK:         %[[DN:.*]] = arith.select %[[BIG]], %[[RESC]], %[[PLUS]]
// CHECK:         %[[MN:.*]] = arith.maximumf %[[M]], %[[X]]
// The total: the row max, then the lanes' sums moved to it (0 for an
// empty row's max).
// CHECK:         %[[RM:.*]] = tile.reduce max %[[MN]]
// CHECK:         %[[EMPTY:.*]] = arith.cmpf oeq, %[[RM]]
// CHECK:         %[[SHIFT:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[RM]] : f32
// CHECK:         %[[SPLAT:.*]] = tile.splat %[[SHIFT]]
// CHECK:         %[[SH:.*]] = arith.subf %[[MN]], %[[SPLAT]]
// CHECK:         %[[EX:.*]] = math.exp %[[SH]] fastmath<afn>
// CHECK:         %[[T:.*]] = arith.mulf %[[DN]], %[[EX]]
// CHECK:         %[[RS:.*]] = tile.reduce sum %[[T]]
// CHECK:         tile.store %arg1[%{{.*}}], %[[RM]]
// CHECK:         tile.store %arg1[%{{.*}}], %[[RS]]
// CHECK-NOT:     tile.softmax
func.func @fold_and_total(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %m0 = tile.splat %ninf : f32 -> tensor<256xf32>
  %d0 = tile.splat %zero : f32 -> tensor<256xf32>
  %t = tile.load %x[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  %mn, %dn = tile.softmax_fold %m0, %d0, %t : tensor<256xf32>
  %mx, %sm = tile.softmax_total %mn, %dn : tensor<256xf32>
  tile.store %out[%c0], %mx : !tile.ptr<f32>[i32], f32
  tile.store %out[%c1], %sm : !tile.ptr<f32>[i32], f32
  return
}
