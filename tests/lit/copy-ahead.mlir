// RUN: tilejit-opt %s --split-input-file --tile-copy-ahead | FileCheck %s

// A walk over [lo, hi) that keeps each tile of x in a shared array (as
// tile-keep-rows writes a kept row's first walk): the copies of the first
// two tiles go before it, each iteration copies the tile two ahead (if the
// walk has one), waits for its own tile and reads it from the array.
// CHECK-LABEL: func.func @kept_walk(
// CHECK:         %[[KEEP:.*]] = tile.shared_alloc
// CHECK:         %[[EXTENT:.*]] = arith.subi %[[HI:.*]], %[[LO:.*]] : i32
// CHECK:         %[[AT0:.*]] = arith.addi %[[LO]], %c0
// CHECK:         %[[HAS0:.*]] = arith.cmpi sgt, %[[EXTENT]], %c0
// CHECK:         tile.copy_async %[[KEEP]][%{{.*}}], %[[XR:.*]][%{{.*}}] mask
// CHECK-NEXT:    tile.copy_commit
// CHECK:         %[[HAS1:.*]] = arith.cmpi sgt, %[[EXTENT]], %c256
// CHECK:         tile.copy_async %[[KEEP]]
// CHECK-NEXT:    tile.copy_commit
// CHECK:         scf.for %[[I:.*]] = %[[LO]] to %[[HI]]
// CHECK:           %[[NEXT:.*]] = arith.addi %[[I]], %c512
// CHECK:           %[[LEFT:.*]] = arith.subi %[[HI]], %[[I]]
// CHECK:           %[[MORE:.*]] = arith.cmpi sgt, %[[LEFT]], %c512
// CHECK:           %[[AHEAD:.*]] = tile.splat %[[MORE]] : i1 -> tensor<256xi1>
// CHECK:           %[[M:.*]] = arith.andi %{{.*}}, %[[AHEAD]]
// CHECK:           tile.copy_async %[[KEEP]][%{{.*}}], %[[XR]][%{{.*}}] mask %[[M]]
// CHECK-NEXT:      tile.copy_commit
// CHECK-NEXT:      tile.copy_wait {lane_only, pending = 2 : i64}
// CHECK:           %[[X:.*]] = tile.load %[[KEEP]][%{{.*}}] mask %{{.*}} other %{{.*}}
// CHECK-NOT:       tile.store %[[KEEP]]
// CHECK:           arith.extf %[[X]]
// CHECK:         }
// CHECK-NEXT:    tile.copy_wait {lane_only, pending = 0 : i64}
func.func @kept_walk(%x: !tile.ptr<bf16>, %V: i32, %lo: i32, %hi: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.copy_ahead = 2 : i64, tile.shared_bytes = 2048 : i64} {
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF80 : bf16
  %init = arith.constant 0xFF800000 : f32
  %keep = tile.shared_alloc {offset = 0 : i64, size = 1024 : i64} : !tile.ptr<bf16>
  %row = tile.program_id 0 : i32
  %base = arith.muli %row, %V : i32
  %xr = tile.addptr %x, %base : !tile.ptr<bf16>, i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %m = scf.for %i = %lo to %hi step %c256 iter_args(%acc = %init) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %in = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %xr[%offs] mask %in other %ninf : !tile.ptr<bf16>[tensor<256xi32>] mask tensor<256xi1> other bf16 -> tensor<256xbf16>
    %local = arith.subi %i, %lo : i32
    %sl = tile.splat %local : i32 -> tensor<256xi32>
    %lofs = arith.addi %sl, %r : tensor<256xi32>
    tile.store %keep[%lofs], %t mask %in : !tile.ptr<bf16>[tensor<256xi32>], tensor<256xbf16> mask tensor<256xi1>
    %tf = arith.extf %t : tensor<256xbf16> to tensor<256xf32>
    %tm = tile.reduce max %tf : tensor<256xf32> -> f32
    %n = arith.maximumf %acc, %tm : f32
    scf.yield %n : f32
  }
  return
}

// -----

// A walk that reads the array it fills is left alone: the copies would
// land after the read.
// CHECK-LABEL: func.func @reads_its_array(
// CHECK-NOT:     tile.copy_async
// CHECK:         tile.store
// CHECK-NOT:     tile.copy_async
func.func @reads_its_array(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.copy_ahead = 2 : i64, tile.shared_bytes = 4096 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %keep = tile.shared_alloc {offset = 0 : i64, size = 1024 : i64} : !tile.ptr<f32>
  %r = tile.arange : tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %keep[%offs], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
    %back = tile.load %keep[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %y[%offs], %back : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}

// -----

// A store to the same slots every iteration (a staging tile, not the
// walk's own part of a row): copies in flight would race for the slots.
// CHECK-LABEL: func.func @same_slots(
// CHECK-NOT:     tile.copy_async
func.func @same_slots(%x: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.copy_ahead = 2 : i64, tile.shared_bytes = 1024 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %keep = tile.shared_alloc {offset = 0 : i64, size = 256 : i64} : !tile.ptr<f32>
  %r = tile.arange : tensor<256xi32>
  scf.for %i = %c0 to %V step %c256 : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    tile.store %keep[%r], %t : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  }
  return
}
