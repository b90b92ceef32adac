// RUN: tilejit-opt %s --split-input-file --tile-peel-tail | FileCheck %s

// A walk masked against its own bound: the whole tiles below
// lb + ((min(ub, V) - lb) / B) B run with the masks the constant true (the
// select and the masked load fold away later), and the walk goes on from
// there with its masks, from the whole tiles' sum.
// CHECK-LABEL: func.func @walk(
// CHECK-NOT:     arith.minsi
// CHECK:         %[[HI:.*]] = arith.maxsi %arg2, %c0_i32 : i32
// CHECK:         %[[SPAN:.*]] = arith.subi %[[HI]], %c0_i32 : i32
// CHECK:         %[[N:.*]] = arith.divsi %[[SPAN]], %c256_i32 : i32
// CHECK:         %[[NB:.*]] = arith.muli %[[N]], %c256_i32 : i32
// CHECK:         %[[MID:.*]] = arith.addi %c0_i32, %[[NB]] : i32
// CHECK:         %[[WHOLE:.*]] = scf.for %{{.*}} = %c0_i32 to %[[MID]] step %c256_i32 iter_args(%{{.*}} = %cst)
// CHECK-NOT:       arith.cmpi
// CHECK:           %[[ALL:.*]] = arith.constant dense<true> : tensor<256xi1>
// CHECK:           tile.load %arg0[%{{.*}}] mask %[[ALL]]
// CHECK:           arith.select %[[ALL]]
// CHECK:           scf.yield
// CHECK:         %[[SUM:.*]] = scf.for %{{.*}} = %[[MID]] to %arg2 step %c256_i32 iter_args(%{{.*}} = %[[WHOLE]])
// CHECK:           %[[M:.*]] = arith.cmpi slt
// CHECK:           tile.load %arg0[%{{.*}}] mask %[[M]]
// CHECK:         } {tile.tail_walk}
// CHECK:         tile.store %arg1[%c0_i32], %[[SUM]]
func.func @walk(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.peel_tail = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %fill = tile.splat %ninf : f32 -> tensor<256xf32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %u = arith.select %m, %t, %fill : tensor<256xi1>, tensor<256xf32>
    %ts = tile.reduce max %u : tensor<256xf32> -> f32
    %n = arith.maximumf %acc, %ts : f32
    scf.yield %n : f32
  }
  tile.store %out[%c0], %s : !tile.ptr<f32>[i32], f32
  return
}

// -----

// A split row's slice ends at min(V, end) and its masks test V (written as
// V > offs): the whole tiles end below both bounds.
// CHECK-LABEL: func.func @slice(
// CHECK:         %[[MIN:.*]] = arith.minsi %[[END:.*]], %arg2 : i32
// CHECK:         %[[HI:.*]] = arith.maxsi %[[MIN]], %arg3 : i32
// CHECK:         %[[SPAN:.*]] = arith.subi %[[HI]], %arg3 : i32
// CHECK:         scf.for %{{.*}} = %arg3 to %[[MID:.*]] step
// CHECK-NOT:       arith.cmpi
// CHECK:           tile.store
// CHECK:         scf.for %{{.*}} = %[[MID]] to %[[END]] step
// CHECK:           arith.cmpi sgt
// CHECK:         } {tile.tail_walk}
func.func @slice(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32, %lo: i32, %len: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.peel_tail = 1 : i64} {
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %end = arith.minsi %V, %len : i32
  scf.for %i = %lo to %end step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %r, %si : tensor<256xi32>
    %m = arith.cmpi sgt, %vs, %offs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    tile.store %y[%offs], %t mask %m : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32> mask tensor<256xi1>
  }
  return
}

// -----

// Left alone: a mask on another tile than the iteration's own, a kernel
// that does not ask, a walk already peeled.
// CHECK-LABEL: func.func @other_tile(
// CHECK-COUNT-1: scf.for
// CHECK-NOT:     scf.for
func.func @other_tile(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.peel_tail = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %sh = tile.splat %c256 : i32 -> tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %next = arith.addi %offs, %sh : tensor<256xi32>
    %m = arith.cmpi slt, %next, %vs : tensor<256xi32>
    %t = tile.load %x[%next] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    tile.store %x[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// CHECK-LABEL: func.func @not_asked(
// CHECK-COUNT-1: scf.for
// CHECK-NOT:     scf.for
func.func @not_asked(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    tile.store %x[%offs], %t mask %m : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32> mask tensor<256xi1>
  }
  return
}

// CHECK-LABEL: func.func @peeled(
// CHECK-COUNT-1: scf.for
// CHECK-NOT:     scf.for
func.func @peeled(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.peel_tail = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    tile.store %x[%offs], %t mask %m : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32> mask tensor<256xi1>
  } {tile.tail_walk}
  return
}
