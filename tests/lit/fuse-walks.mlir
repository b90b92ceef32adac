// RUN: tilejit-opt %s --split-input-file --tile-fuse-walks | FileCheck %s

// A sums f(x) over the row, B writes g(x) over x itself (in place) and
// needs nothing A computes: one walk carrying A's sum, A's body then B's.
// The store of A's sum moves after it; the scale B reads moves before it.
// CHECK-LABEL: func.func @loss_then_grad(
// CHECK:         %[[S:.*]] = tile.load %arg2[%c0_i32]
// CHECK:         %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<256xf32>)
// CHECK:           %[[A:.*]] = tile.load %arg0[%[[O:.*]]] mask
// CHECK:           arith.addf %[[ACC]]
// CHECK:           %[[B:.*]] = tile.load %arg0[%{{.*}}] mask
// CHECK:           tile.store %arg0[%{{.*}}], %{{.*}} mask
// CHECK:           scf.yield
// CHECK-NOT:     scf.for
// CHECK:         tile.reduce sum %[[R]]
// CHECK:         tile.store %arg1[%c0_i32]
func.func @loss_then_grad(%x: !tile.ptr<f32> {tile.may_alias}, %loss: !tile.ptr<f32>, %scale: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.fuse_walks = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %Vs = tile.splat %V : i32 -> tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zeros) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %Vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m other %zero : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> other f32 -> tensor<256xf32>
    %e = math.exp %t : tensor<256xf32>
    %n = arith.addf %acc, %e : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  %sum = tile.reduce sum %s : tensor<256xf32> -> f32
  tile.store %loss[%c0], %sum : !tile.ptr<f32>[i32], f32
  %g = tile.load %scale[%c0] : !tile.ptr<f32>[i32] -> f32
  %gs = tile.splat %g : f32 -> tensor<256xf32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %Vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m other %zero : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> other f32 -> tensor<256xf32>
    %e = math.exp %t : tensor<256xf32>
    %d = arith.mulf %e, %gs : tensor<256xf32>
    tile.store %x[%offs], %d mask %m : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32> mask tensor<256xi1>
  }
  return
}

// -----

// Left alone: B needs A's sum (a softmax's normalizer), A writes memory,
// B writes where a later iteration of A would read (one element on), and a
// kernel that does not ask.
// CHECK-LABEL: func.func @needs_the_sum(
// CHECK-COUNT-2: scf.for
func.func @needs_the_sum(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.fuse_walks = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zeros) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %n = arith.addf %acc, %t : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  %sum = tile.reduce sum %s : tensor<256xf32> -> f32
  %ss = tile.splat %sum : f32 -> tensor<256xf32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %d = arith.divf %t, %ss : tensor<256xf32>
    tile.store %y[%offs], %d : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// CHECK-LABEL: func.func @first_writes(
// CHECK-COUNT-2: scf.for
func.func @first_writes(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.fuse_walks = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %r = tile.arange : tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %y[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %y[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %x[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// CHECK-LABEL: func.func @shifted_store(
// CHECK-COUNT-2: scf.for
func.func @shifted_store(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.fuse_walks = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %ones = tile.splat %c1 : i32 -> tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zeros) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %n = arith.addf %acc, %t : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %next = arith.addi %offs, %ones : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %x[%next], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  %sum = tile.reduce sum %s : tensor<256xf32> -> f32
  tile.store %x[%c0], %sum : !tile.ptr<f32>[i32], f32
  return
}

// CHECK-LABEL: func.func @not_asked(
// CHECK-COUNT-2: scf.for
func.func @not_asked(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %zeros = tile.splat %zero : f32 -> tensor<256xf32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zeros) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %n = arith.addf %acc, %t : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %y[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  %sum = tile.reduce sum %s : tensor<256xf32> -> f32
  tile.store %y[%c0], %sum : !tile.ptr<f32>[i32], f32
  return
}
