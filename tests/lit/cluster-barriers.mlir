// RUN: tilejit-opt %s --split-input-file --simt-cluster-barriers | FileCheck %s

// In program order: a combine outside loops takes one mbarrier and one slot
// buffer, one in a loop two of each (used in turn), then the next one
// outside loops one again; the kernel's array holds all four.
// CHECK-LABEL: func.func @combines(
// CHECK-SAME:    simt.cluster_mbarriers = 4 : i64
// CHECK:         tile.cluster_reduce max %arg0 {cluster_buffers = 1 : i64, cluster_mbarrier = 0 : i64}
// CHECK:         scf.for
// CHECK:           tile.cluster_reduce sum %{{.*}} {cluster_buffers = 2 : i64, cluster_mbarrier = 1 : i64}
// CHECK:         tile.cluster_reduce sum %{{.*}} {cluster_buffers = 1 : i64, cluster_mbarrier = 3 : i64}
func.func @combines(%x: f32, %n: i32) attributes {tile.kernel, tile.cluster_size = 4 : i64, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %m = tile.cluster_reduce max %x : f32 -> f32
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %m) -> (f32) : i32 {
    %t = tile.cluster_reduce sum %acc : f32 -> f32
    scf.yield %t : f32
  }
  %u = tile.cluster_reduce sum %s : f32 -> f32
  return
}

// -----

// A cluster of one program combines nothing: no mbarriers.
// CHECK-LABEL: func.func @one_program(
// CHECK-NOT:     cluster_mbarrier
func.func @one_program(%x: f32) attributes {tile.kernel, tile.cluster_size = 1 : i64, simt.threads = 256 : i64} {
  %m = tile.cluster_reduce max %x : f32 -> f32
  return
}
