// RUN: tilejit-opt %s --split-input-file --tile-load-ahead | FileCheck %s

// Both loads of the walk's own tile are issued for the first tile before
// the walk (masked off for an empty walk) and for the next tile at the top
// of the body (masked off past its end); the body computes on the tiles
// carried in.
// CHECK-LABEL: func.func @walk(
// CHECK:         %[[IN0:.*]] = arith.cmpi slt, %c0_i32, %arg3 : i32
// CHECK:         %[[X0:.*]] = tile.load %arg0
// CHECK:         %[[Y0:.*]] = tile.load %arg1
// CHECK:         scf.for %[[I:.*]] = {{.*}} iter_args(%{{.*}} = %cst, %[[XC:.*]] = %[[X0]], %[[YC:.*]] = %[[Y0]])
// CHECK:           %[[NEXT:.*]] = arith.addi %[[I]], %c256_i32 : i32
// CHECK:           %[[LEFT:.*]] = arith.subi %arg3, %[[I]] : i32
// CHECK:           %[[IN:.*]] = arith.cmpi sgt, %[[LEFT]], %c256_i32 : i32
// CHECK:           %[[XN:.*]] = tile.load %arg0
// CHECK:           %[[YN:.*]] = tile.load %arg1
// CHECK-NOT:       tile.load
// CHECK:           arith.addf %[[XC]], %[[YC]]
// CHECK:           scf.yield %{{.*}}, %[[XN]], %[[YN]]
func.func @walk(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.load_ahead = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %u = tile.load %y[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %tu = arith.addf %t, %u : tensor<256xf32>
    %ts = tile.reduce sum %tu : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  tile.store %out[%c0], %s : !tile.ptr<f32>[i32], f32
  return
}

// -----

// The body writes the memory its load reads at another offset: the load
// stays where it is.
// CHECK-LABEL: func.func @written_by_the_walk(
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK-NEXT:      tile.splat
// CHECK-NEXT:      arith.addi
// CHECK-NEXT:      tile.load %arg0
func.func @written_by_the_walk(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.load_ahead = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %shift = tile.splat %c256 : i32 -> tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %next = arith.addi %offs, %shift : tensor<256xi32>
    tile.store %x[%next], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// -----

// A walk that runs only for rows longer than the kernel is compiled for
// (tile-keep-rows' tile.row_tail) keeps its loads where they are: their
// registers would count against every program.
// CHECK-LABEL: func.func @row_tail(
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) : i32 {
// CHECK-NEXT:      tile.splat
// CHECK-NEXT:      arith.addi
// CHECK-NEXT:      tile.load %arg0
func.func @row_tail(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.load_ahead = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  } {tile.row_tail}
  tile.store %out[%c0], %s : !tile.ptr<f32>[i32], f32
  return
}
