// RUN: tilejit-opt %s --split-input-file --simt-vectorize-access | FileCheck %s

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

// -----

// A 2-D tile's element e = tid * 8 + [0..7, 2048..2055] at row e / 128 and
// column e % 128 (BlockIndex.h): within each group of 8 the row is one and
// the columns consecutive, so row * ld + col is contiguous in groups of 8
// whatever ld is (bf16: one 16-byte access). Dividing by 12 (not a multiple
// of 8) or a possibly negative index keeps nothing.
// CHECK-LABEL: func.func @rows_and_columns
func.func @rows_and_columns(%p: !tile.ptr<bf16>, %ld: i64, %i: i32) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c8 = arith.constant 8 : i32
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 2048, 2049, 2050, 2051, 2052, 2053, 2054, 2055]> : vector<16xi32>
  %c128 = arith.constant dense<128> : vector<16xi32>
  %c12 = arith.constant dense<12> : vector<16xi32>
  %tid = simt.thread_id : i32
  %base = arith.muli %tid, %c8 : i32
  %bb = vector.broadcast %base : i32 to vector<16xi32>
  %e = arith.addi %bb, %iota : vector<16xi32>
  %row = arith.divsi %e, %c128 : vector<16xi32>
  %q = arith.muli %row, %c128 : vector<16xi32>
  %col = arith.subi %e, %q : vector<16xi32>
  %rem = arith.remsi %e, %c128 : vector<16xi32>
  %row64 = arith.extsi %row : vector<16xi32> to vector<16xi64>
  %col64 = arith.extsi %col : vector<16xi32> to vector<16xi64>
  %rem64 = arith.extsi %rem : vector<16xi32> to vector<16xi64>
  %ldb = vector.broadcast %ld : i64 to vector<16xi64>
  %start = arith.muli %row64, %ldb : vector<16xi64>
  %offs = arith.addi %start, %col64 : vector<16xi64>
  // CHECK: simt.load {{.*}} {vec = 8 : i64}
  %x = simt.load %p[%offs] : !tile.ptr<bf16>[vector<16xi64>] -> vector<16xbf16>
  %offs2 = arith.addi %start, %rem64 : vector<16xi64>
  // CHECK: simt.store {{.*}} {vec = 8 : i64}
  simt.store %p[%offs2], %x : !tile.ptr<bf16>[vector<16xi64>], vector<16xbf16>
  %row12 = arith.divsi %e, %c12 : vector<16xi32>
  %col12 = arith.remsi %e, %c12 : vector<16xi32>
  %ldb32 = arith.trunci %ldb : vector<16xi64> to vector<16xi32>
  %start12 = arith.muli %row12, %ldb32 : vector<16xi32>
  %offs12 = arith.addi %start12, %col12 : vector<16xi32>
  // CHECK: simt.load
  // CHECK-NOT: vec =
  // CHECK-SAME: -> vector<16xbf16>
  %y = simt.load %p[%offs12] : !tile.ptr<bf16>[vector<16xi32>] -> vector<16xbf16>
  %ib = vector.broadcast %i : i32 to vector<16xi32>
  %signed = arith.addi %ib, %e : vector<16xi32>
  %srow = arith.divsi %signed, %c128 : vector<16xi32>
  %scol = arith.remsi %signed, %c128 : vector<16xi32>
  %sstart = arith.muli %srow, %c128 : vector<16xi32>
  %soffs = arith.addi %sstart, %scol : vector<16xi32>
  // CHECK: simt.load
  // CHECK-NOT: vec =
  // CHECK-SAME: -> vector<16xbf16>
  %z = simt.load %p[%soffs] : !tile.ptr<bf16>[vector<16xi32>] -> vector<16xbf16>
  return
}

// -----

// Zero extension keeps the groups of offsets known not to be negative
// (tid * 8 + iota) and nothing of others (i + iota may run from -1 to 0,
// which become 2^32 - 1 and 0).
// CHECK-LABEL: func.func @zero_extension
func.func @zero_extension(%p: !tile.ptr<bf16>, %i: i32) attributes {tile.kernel, simt.threads = 256 : i64} {
  %c8 = arith.constant 8 : i32
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi32>
  %tid = simt.thread_id : i32
  %base = arith.muli %tid, %c8 : i32
  %bb = vector.broadcast %base : i32 to vector<8xi32>
  %own = arith.addi %bb, %iota : vector<8xi32>
  %ownWide = arith.extui %own : vector<8xi32> to vector<8xi64>
  // CHECK: simt.load {{.*}} {vec = 8 : i64}
  %x = simt.load %p[%ownWide] : !tile.ptr<bf16>[vector<8xi64>] -> vector<8xbf16>
  %ib = vector.broadcast %i : i32 to vector<8xi32>
  %any = arith.addi %ib, %iota : vector<8xi32>
  %anyWide = arith.extui %any : vector<8xi32> to vector<8xi64>
  // CHECK: simt.load
  // CHECK-NOT: vec =
  // CHECK-SAME: -> vector<8xbf16>
  %y = simt.load %p[%anyWide] : !tile.ptr<bf16>[vector<8xi64>] -> vector<8xbf16>
  return
}
