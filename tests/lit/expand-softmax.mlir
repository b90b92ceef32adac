// RUN: tilejit-opt %s --split-input-file --tile-expand-softmax | FileCheck %s

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

// -----

// A state carried through a walk from (-inf, 0) to its total is kept per
// group of the layout's width (f32 loads at 1 warp: 4 of each thread's 8
// elements): a group max, one exp per group to rescale and one per
// element, summed within the group.
// CHECK-LABEL: func.func @walk(
// CHECK:         %[[M0:.*]] = tile.splat %{{.*}} : f32 -> tensor<64xf32>
// CHECK:         %[[D0:.*]] = tile.splat %{{.*}} : f32 -> tensor<64xf32>
// CHECK:         %[[R:.*]]:2 = scf.for {{.*}} iter_args(%[[M:.*]] = %[[M0]], %[[D:.*]] = %[[D0]]) -> (tensor<64xf32>, tensor<64xf32>)
// CHECK:           %[[X:.*]] = tile.load
// CHECK:           %[[G:.*]] = tile.reduce_rows max %[[X]] {cols = 4 : i64} : tensor<256xf32> -> tensor<64xf32>
// CHECK:           %[[MN:.*]] = arith.maximumf %[[M]], %[[G]] : tensor<64xf32>
// CHECK:           %[[EMPTY:.*]] = arith.cmpf oeq, %[[MN]]
// CHECK:           %[[S:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[MN]] : tensor<64xi1>, tensor<64xf32>
// CHECK:           %[[SC:.*]] = arith.subf %[[M]], %[[S]] : tensor<64xf32>
// CHECK:           %[[SCALE:.*]] = math.exp %[[SC]] fastmath<afn> : tensor<64xf32>
// CHECK:           %[[WIDE:.*]] = tile.broadcast_rows %[[S]] {cols = 4 : i64} : tensor<64xf32> -> tensor<256xf32>
// CHECK:           %[[XS:.*]] = arith.subf %[[X]], %[[WIDE]] : tensor<256xf32>
// CHECK:           %[[E:.*]] = math.exp %[[XS]] fastmath<afn> : tensor<256xf32>
// CHECK:           %[[ES:.*]] = tile.reduce_rows sum %[[E]] {cols = 4 : i64} : tensor<256xf32> -> tensor<64xf32>
// CHECK:           %[[DS:.*]] = arith.mulf %[[D]], %[[SCALE]] : tensor<64xf32>
// CHECK:           %[[DN:.*]] = arith.addf %[[DS]], %[[ES]] : tensor<64xf32>
// CHECK:           scf.yield %[[MN]], %[[DN]]
// CHECK:         tile.reduce max %[[R]]#0 : tensor<64xf32> -> f32
// CHECK-NOT:     tile.softmax
func.func @walk(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %m0 = tile.splat %ninf : f32 -> tensor<256xf32>
  %d0 = tile.splat %zero : f32 -> tensor<256xf32>
  %s:2 = scf.for %i = %c0 to %V step %c256 iter_args(%m = %m0, %d = %d0) -> (tensor<256xf32>, tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %mn, %dn = tile.softmax_fold %m, %d, %t : tensor<256xf32>
    scf.yield %mn, %dn : tensor<256xf32>, tensor<256xf32>
  }
  %mx, %sm = tile.softmax_total %s#0, %s#1 : tensor<256xf32>
  tile.store %out[%c0], %mx : !tile.ptr<f32>[i32], f32
  tile.store %out[%c1], %sm : !tile.ptr<f32>[i32], f32
  return
}

// -----

// tile-split-rows starts all but a row's first program from the combine's
// identity, a select between two splats of it: still (-inf, 0).
// CHECK-LABEL: func.func @split_walk(
// CHECK:         scf.for {{.*}} -> (tensor<64xf32>, tensor<64xf32>)
// CHECK:           tile.reduce_rows max %{{.*}} {cols = 4 : i64}
func.func @split_walk(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32, %first: i1) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %f = tile.splat %first : i1 -> tensor<256xi1>
  %ninfs = tile.splat %ninf : f32 -> tensor<256xf32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %m0 = arith.select %f, %ninfs, %ninfs : tensor<256xi1>, tensor<256xf32>
  %d0 = arith.select %f, %zeros, %zeros : tensor<256xi1>, tensor<256xf32>
  %s:2 = scf.for %i = %c0 to %V step %c256 iter_args(%m = %m0, %d = %d0) -> (tensor<256xf32>, tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %mn, %dn = tile.softmax_fold %m, %d, %t : tensor<256xf32>
    scf.yield %mn, %dn : tensor<256xf32>, tensor<256xf32>
  }
  %mx, %sm = tile.softmax_total %s#0, %s#1 : tensor<256xf32>
  tile.store %out[%c0], %mx : !tile.ptr<f32>[i32], f32
  return
}
