// RUN: tilejit-opt %s --split-input-file --tile-keep-rows | FileCheck %s

// Two walks over one row: the first keeps min(K, V) elements of x in a
// shared array as it reads them (K = 1024: the row_extent rounded up to the
// step), the second reads them back and only the rest from global memory.
// CHECK-LABEL: func.func @two_walks(
// CHECK-SAME:      tile.shared_bytes = 4096 : i64
// CHECK:         %[[KEEP:.*]] = tile.shared_alloc {offset = 0 : i64, size = 1024 : i64} : !tile.ptr<f32>
// CHECK:         %[[LEFT:.*]] = arith.subi %arg2, %c0
// CHECK:         %[[FITS:.*]] = arith.cmpi slt, %[[LEFT]], %c1024
// CHECK:         %[[MID:.*]] = arith.select %[[FITS]], %arg2, %{{.*}} : i32
// CHECK:         %[[HEAD:.*]] = scf.for %{{.*}} = %c0{{.*}} to %[[MID]]
// CHECK:           %[[X:.*]] = tile.load %[[XR:.*]][
// CHECK:           tile.store %[[KEEP]][%{{.*}}], %[[X]] mask
// CHECK:         %[[SUM:.*]] = scf.for %{{.*}} = %[[MID]] to %arg2 {{.*}} iter_args(%{{.*}} = %[[HEAD]])
// CHECK-NOT:       tile.store %[[KEEP]]
// CHECK:         } {tile.row_tail}
// CHECK:         tile.barrier
// CHECK:         scf.for %{{.*}} = %c0{{.*}} to %[[MID]]
// CHECK:           tile.load %[[KEEP]][%{{.*}}] mask
// CHECK:           tile.store %arg1
// CHECK:         scf.for %{{.*}} = %[[MID]] to %arg2
// CHECK:           tile.load %[[XR]][
// The walks past the arrays run only for rows longer than row_extent:
// CHECK:         } {tile.row_tail}
func.func @two_walks(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.keep_row = 1 : i64, tile.row_extent = 1000 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
  %base = arith.muli %row, %V : i32
  %xr = tile.addptr %x, %base : !tile.ptr<f32>, i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %xr[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  %ss = tile.splat %s : f32 -> tensor<256xf32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %r, %si : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %xr[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %q = arith.divf %t, %ss : tensor<256xf32>
    tile.store %y[%offs], %q mask %m : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32> mask tensor<256xi1>
  }
  return
}

// -----

// In place: the second walk writes each element over the one it just read,
// so keeping the row stays exact (the pointers may alias, at the same base
// offset and offsets).
// CHECK-LABEL: func.func @in_place(
// CHECK:         tile.shared_alloc {offset = 0 : i64, size = 512 : i64} : !tile.ptr<bf16>
// CHECK:         tile.barrier
func.func @in_place(%x: !tile.ptr<bf16> {tile.may_alias}, %g: !tile.ptr<bf16> {tile.may_alias}, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.keep_row = 1 : i64, tile.row_extent = 512 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
  %base = arith.muli %row, %V : i32
  %xr = tile.addptr %x, %base : !tile.ptr<bf16>, i32
  %gr = tile.addptr %g, %base : !tile.ptr<bf16>, i32
  %r = tile.arange : tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %xr[%offs] : !tile.ptr<bf16>[tensor<256xi32>] -> tensor<256xbf16>
    %tf = arith.extf %t : tensor<256xbf16> to tensor<256xf32>
    %ts = tile.reduce sum %tf : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %xr[%offs] : !tile.ptr<bf16>[tensor<256xi32>] -> tensor<256xbf16>
    tile.store %gr[%offs], %t : !tile.ptr<bf16>[tensor<256xi32>], tensor<256xbf16>
  }
  return
}

// -----

// A store between the walks that may reach the row: the row is re-read.
// CHECK-LABEL: func.func @written_between(
// CHECK-NOT:     tile.shared_alloc
// CHECK:         return
func.func @written_between(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.keep_row = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
  %base = arith.muli %row, %V : i32
  %xr = tile.addptr %x, %base : !tile.ptr<f32>, i32
  %r = tile.arange : tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %xr[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  tile.store %x[%c0], %s : !tile.ptr<f32>[i32], f32
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %xr[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %xr[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// -----

// A vector every row reads at its argument (class weights) stays in L2.
// CHECK-LABEL: func.func @shared_vector(
// CHECK-NOT:     tile.shared_alloc
// CHECK:         return
func.func @shared_vector(%w: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.keep_row = 1 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %r = tile.arange : tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %w[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  %ss = tile.splat %s : f32 -> tensor<256xf32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %w[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %q = arith.divf %t, %ss : tensor<256xf32>
    tile.store %y[%offs], %q : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}
