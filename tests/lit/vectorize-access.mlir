// RUN: tilejit-opt %s --simt-vectorize-access | FileCheck %s

// Offsets = broadcast(i) + broadcast(tid * 8) + [0..7, 2048..2055]: groups of 8
// consecutive offsets, 16 bytes of bf16 -> vec = 8. For f32 the 16-byte limit
// gives 4. A uniform or scattered index gives no vec attribute.

// CHECK-LABEL: func.func @groups
func.func @groups(%p: !tile.ptr<bf16>, %q: !tile.ptr<f32>, %i: i32, %m: vector<16xi1>) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c8 = arith.constant 8 : i32
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 2048, 2049, 2050, 2051, 2052, 2053, 2054, 2055]> : vector<16xi32>
  %tid = simt.thread_id : i32
  %base = arith.muli %tid, %c8 : i32
  %bb = vector.broadcast %base : i32 to vector<16xi32>
  %ib = vector.broadcast %i : i32 to vector<16xi32>
  %t = arith.addi %bb, %iota : vector<16xi32>
  %offs = arith.addi %ib, %t : vector<16xi32>
  // CHECK: simt.load {{.*}} {vec = 8 : i64}
  %x = simt.load %p[%offs] mask %m : !tile.ptr<bf16>[vector<16xi32>] mask vector<16xi1> -> vector<16xbf16>
  // CHECK: simt.store {{.*}} {vec = 4 : i64}
  %wide = arith.extsi %offs : vector<16xi32> to vector<16xi64>
  %y = arith.extf %x : vector<16xbf16> to vector<16xf32>
  simt.store %q[%wide], %y : !tile.ptr<f32>[vector<16xi64>], vector<16xf32>
  // CHECK: simt.load
  // CHECK-NOT: vec =
  // CHECK-SAME: -> vector<16xbf16>
  %z = simt.load %p[%ib] : !tile.ptr<bf16>[vector<16xi32>] -> vector<16xbf16>
  // CHECK: simt.load
  // CHECK-NOT: vec =
  // CHECK-SAME: -> vector<16xbf16>
  %scaled = arith.muli %offs, %offs : vector<16xi32>
  %w = simt.load %p[%scaled] : !tile.ptr<bf16>[vector<16xi32>] -> vector<16xbf16>
  return
}
