// RUN: tilejit-opt %s --split-input-file --tile-unswitch | FileCheck %s

// The walk selects by %rev (over a tile, through its splat) and stores
// under `not %rev`: one copy of the walk per value of %rev, each with the
// constant in its place.
// CHECK-LABEL: func.func @two_forms(
// CHECK:         %[[REV:.*]] = arith.cmpi ne, %arg2, %c0_i32 : i32
// CHECK:         %[[R:.*]] = scf.if %[[REV]] -> (tensor<256xf32>) {
// CHECK:           %[[A:.*]] = scf.for
// CHECK-DAG:         %[[T:.*]] = arith.constant dense<true> : tensor<256xi1>
// CHECK-DAG:         %[[F:.*]] = arith.constant false
// CHECK:             arith.select %[[T]]
// CHECK:             scf.if %[[F]] {
// CHECK:           scf.yield %[[A]]
// CHECK:         } else {
// CHECK:           %[[B:.*]] = scf.for
// CHECK-DAG:         %[[T2:.*]] = arith.constant true
// CHECK-DAG:         %[[F2:.*]] = arith.constant dense<false> : tensor<256xi1>
// CHECK:             arith.select %[[F2]]
// CHECK:             scf.if %[[T2]] {
// CHECK:           scf.yield %[[B]]
// CHECK:         tile.reduce sum %[[R]]
func.func @two_forms(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %reverse: i32, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.unswitch = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %true = arith.constant true
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %rev = arith.cmpi ne, %reverse, %c0 : i32
  %revs = tile.splat %rev : i1 -> tensor<256xi1>
  %fwd = arith.xori %rev, %true : i1
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zeros) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %neg = arith.negf %t : tensor<256xf32>
    %u = arith.select %revs, %t, %neg : tensor<256xi1>, tensor<256xf32>
    scf.if %fwd {
      tile.store %x[%offs], %neg : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
    }
    %n = arith.addf %acc, %u : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  %sum = tile.reduce sum %s : tensor<256xf32> -> f32
  tile.store %out[%c0], %sum : !tile.ptr<f32>[i32], f32
  return
}

// -----

// Left alone: a condition the walk computes, a walk carrying an online
// softmax state, a kernel that does not ask.
// CHECK-LABEL: func.func @computed(
// CHECK-NOT:     scf.if
func.func @computed(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.unswitch = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %pos = arith.cmpf ogt, %t, %zeros : tensor<256xf32>
    %u = arith.select %pos, %t, %zeros : tensor<256xi1>, tensor<256xf32>
    tile.store %x[%offs], %u : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// CHECK-LABEL: func.func @softmax_state(
// CHECK-NOT:     scf.if
func.func @softmax_state(%x: !tile.ptr<f32>, %flag: i1, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.unswitch = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %flags = tile.splat %flag : i1 -> tensor<256xi1>
  %m, %d = scf.for %i = %c0 to %V step %c256 iter_args(%m0 = %zeros, %d0 = %zeros) -> (tensor<256xf32>, tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %u = arith.select %flags, %t, %zeros : tensor<256xi1>, tensor<256xf32>
    %m1, %d1 = tile.softmax_fold %m0, %d0, %u : tensor<256xf32>
    scf.yield %m1, %d1 : tensor<256xf32>, tensor<256xf32>
  }
  return
}

// CHECK-LABEL: func.func @not_asked(
// CHECK-NOT:     scf.if
func.func @not_asked(%x: !tile.ptr<f32>, %flag: i1, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %flags = tile.splat %flag : i1 -> tensor<256xi1>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %neg = arith.negf %t : tensor<256xf32>
    %u = arith.select %flags, %t, %neg : tensor<256xi1>, tensor<256xf32>
    tile.store %x[%offs], %u : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// -----

// The condition also starts a value the walk carries: each copy starts it
// from the condition itself (outside the copy), not from the constant.
// CHECK-LABEL: func.func @carried_init(
// CHECK:         scf.if %arg1
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %arg1)
// CHECK:         } else {
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %arg1)
func.func @carried_init(%x: !tile.ptr<f32>, %flag: i1, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.unswitch = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  %flags = tile.splat %flag : i1 -> tensor<256xi1>
  %last = scf.for %i = %c0 to %V step %c256 iter_args(%f = %flag) -> (i1) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %neg = arith.negf %t : tensor<256xf32>
    %u = arith.select %flags, %t, %neg : tensor<256xi1>, tensor<256xf32>
    tile.store %x[%offs], %u : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
    %g = arith.xori %f, %f : i1
    scf.yield %g : i1
  }
  return
}
