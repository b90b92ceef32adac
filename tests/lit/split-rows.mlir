// RUN: tilejit-opt %s --split-input-file --verify-diagnostics --tile-split-rows | FileCheck %s

// A row's sum over a walk: program p handles row p / 4; the walk runs rank
// p % 4's slice [r * per, min(V, (r + 1) * per)), per = ceil(V / 1024) * 256;
// the partial is combined over the cluster and stored by rank 0 only.
// CHECK-LABEL: func.func @row_sum(
// CHECK:         %[[PID:.*]] = tile.program_id 0 : i32
// CHECK:         %[[ROW:.*]] = arith.divsi %[[PID]], %c4_i32
// CHECK:         %[[RANK:.*]] = arith.remsi %[[PID]], %c4_i32
// CHECK:         %[[Q:.*]] = arith.divsi %arg2, %c1024_i32
// CHECK:         %[[PER:.*]] = arith.muli %{{.*}}, %c256_i32
// CHECK:         %[[LO:.*]] = arith.muli %[[RANK]], %[[PER]]
// CHECK:         %[[LEFT:.*]] = arith.subi %arg2, %[[LO]]
// CHECK:         %[[COUNT:.*]] = arith.select %{{.*}}, %[[LEFT]], %[[PER]] : i32
// CHECK:         %[[HI:.*]] = arith.addi %[[LO]], %[[COUNT]]
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[RANK]], %c0_i32
// CHECK-NOT:     tile.program_id
// CHECK:         %[[INIT:.*]] = arith.select %[[FIRST]], %{{.*}}, %{{.*}} : f32
// CHECK:         %[[PART:.*]] = scf.for %{{.*}} = %[[LO]] to %[[HI]] step %{{.*}} iter_args(%{{.*}} = %[[INIT]])
// CHECK:         %[[ALL:.*]] = tile.cluster_reduce sum %[[PART]] : f32 -> f32
// CHECK:         tile.store %arg1[%[[ROW]]], %[[ALL]] mask %[[FIRST]]
func.func @row_sum(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 4 : i64, tile.split_rows = 4 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
  %r = tile.arange : tensor<256xi32>
  %vs = tile.splat %V : i32 -> tensor<256xi32>
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %one) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %m = arith.cmpi slt, %offs, %vs : tensor<256xi32>
    %t = tile.load %x[%offs] mask %m : !tile.ptr<f32>[tensor<256xi32>] mask tensor<256xi1> -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    scf.yield %n : f32
  }
  tile.store %out[%row], %s : !tile.ptr<f32>[i32], f32
  return
}

// -----

// Per-lane partials (a max tile) are combined where they are reduced; a
// max needs no change of its start value.
// CHECK-LABEL: func.func @lane_max(
// CHECK:         %[[M:.*]] = scf.for
// CHECK:         %[[R:.*]] = tile.reduce max %[[M]]
// CHECK:         %[[ALL:.*]] = tile.cluster_reduce max %[[R]] : f32 -> f32
// CHECK:         tile.store %arg1[%{{.*}}], %[[ALL]] mask
func.func @lane_max(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %row = tile.program_id 0 : i32
  %r = tile.arange : tensor<256xi32>
  %init = tile.splat %ninf : f32 -> tensor<256xf32>
  %m = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %init) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %n = arith.maximumf %acc, %t : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  %mx = tile.reduce max %m : tensor<256xf32> -> f32
  tile.store %out[%row], %mx : !tile.ptr<f32>[i32], f32
  return
}

// -----

// A carried value that is not a reduction cannot be split.
func.func @not_a_reduction(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %one = arith.constant 1.0 : f32
  %row = tile.program_id 0 : i32
  // expected-error @+1 {{value 0 the walk carries is not an add, max or min reduction}}
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %one) -> (f32) : i32 {
    %n = arith.mulf %acc, %acc : f32
    scf.yield %n : f32
  }
  tile.store %out[%row], %s : !tile.ptr<f32>[i32], f32
  return
}

// -----

// A kernel that already combines over its cluster is scheduled by hand.
// expected-error @+1 {{the kernel already combines over a cluster}}
func.func @hand_split(%out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %one = arith.constant 1.0 : f32
  %s = tile.cluster_reduce sum %one : f32 -> f32
  %row = tile.program_id 0 : i32
  tile.store %out[%row], %s : !tile.ptr<f32>[i32], f32
  return
}

// -----

// An online-softmax state: both halves start from the identity (-inf, 0)
// off rank 0, and after its total the programs' maxes and rescaled sums
// are combined: M = max M_r, S = sum S_r exp(M_r - M).
// CHECK-LABEL: func.func @softmax_state(
// CHECK:         %[[M0:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<256xi1>, tensor<256xf32>
// CHECK:         %[[D0:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<256xi1>, tensor<256xf32>
// CHECK:         %[[S:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %[[M0]], %{{.*}} = %[[D0]])
// CHECK:           tile.softmax_fold
// CHECK:         %[[MAX:.*]], %[[SUM:.*]] = tile.softmax_total %[[S]]#0, %[[S]]#1
// CHECK:         %[[ALLMAX:.*]] = tile.cluster_reduce max %[[MAX]]
// CHECK:         %[[SHIFT:.*]] = arith.select %{{.*}}, %{{.*}}, %[[ALLMAX]] : f32
// CHECK:         %[[DIFF:.*]] = arith.subf %[[MAX]], %[[SHIFT]]
// CHECK:         %[[SCALE:.*]] = math.exp %[[DIFF]] fastmath<afn>
// CHECK:         %[[MINE:.*]] = arith.mulf %[[SUM]], %[[SCALE]]
// CHECK:         %[[ALLSUM:.*]] = tile.cluster_reduce sum %[[MINE]]
// CHECK:         tile.store %arg1[%{{.*}}], %[[ALLMAX]] mask
// CHECK:         tile.store %arg2[%{{.*}}], %[[ALLSUM]] mask
func.func @softmax_state(%x: !tile.ptr<f32>, %outM: !tile.ptr<f32>, %outS: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
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
  tile.store %outM[%row], %mx : !tile.ptr<f32>[i32], f32
  tile.store %outS[%row], %sm : !tile.ptr<f32>[i32], f32
  return
}

// -----

// A running value used inside the walk (a prefix sum) is no reduction.
func.func @prefix_sum(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant 0.0 : f32
  %row = tile.program_id 0 : i32
  %r = tile.arange : tensor<256xi32>
  // expected-error @+1 {{value 0 the walk carries is not an add, max or min reduction}}
  %s = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %zero) -> (f32) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %ts = tile.reduce sum %t : tensor<256xf32> -> f32
    %n = arith.addf %acc, %ts : f32
    %ns = tile.splat %n : f32 -> tensor<256xf32>
    tile.store %out[%offs], %ns : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
    scf.yield %n : f32
  }
  return
}

// -----

// Per-lane partials reduced inside another walk: the programs of a cluster
// run that walk different numbers of times and could not meet there.
func.func @reduced_in_a_loop(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 2 : i64, tile.split_rows = 2 : i64} {
  %c0 = arith.constant 0 : i32
  %c256 = arith.constant 256 : i32
  %ninf = arith.constant 0xFF800000 : f32
  %r = tile.arange : tensor<256xi32>
  %init = tile.splat %ninf : f32 -> tensor<256xf32>
  %m = scf.for %i = %c0 to %V step %c256 iter_args(%acc = %init) -> (tensor<256xf32>) : i32 {
    %si = tile.splat %i : i32 -> tensor<256xi32>
    %offs = arith.addi %si, %r : tensor<256xi32>
    %t = tile.load %x[%offs] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
    %n = arith.maximumf %acc, %t : tensor<256xf32>
    scf.yield %n : tensor<256xf32>
  }
  scf.for %i = %c0 to %V step %c256 : i32 {
    %c = arith.cmpi eq, %i, %c0 : i32
    scf.if %c {
      // expected-error @+1 {{inside a loop}}
      %mx = tile.reduce max %m : tensor<256xf32> -> f32
      tile.store %out[%i], %mx : !tile.ptr<f32>[i32], f32
    }
  }
  return
}
