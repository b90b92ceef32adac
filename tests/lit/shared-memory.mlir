// RUN: tilejit-opt %s --split-input-file --verify-diagnostics --tile-assign-layout --tile-lower-to-simt | FileCheck %s

// A shared array is a pointer like any other: tile.load / tile.store become
// simt.load / simt.store on it; the alloc and the barrier stay as they are
// for the emitter (dynamic shared memory at the given offset, __syncthreads).
// CHECK-LABEL: func.func @copy_through_shared(
// CHECK-SAME:      tile.shared_bytes = 2048 : i64
// CHECK:         %[[S:.*]] = tile.shared_alloc {offset = 1024 : i64, size = 256 : i64} : !tile.ptr<f32>
// CHECK:         simt.store %[[S]]
// CHECK:         tile.barrier
// CHECK:         simt.load %[[S]]
func.func @copy_through_shared(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 2048 : i64} {
  %s = tile.shared_alloc {offset = 1024 : i64, size = 256 : i64} : !tile.ptr<f32>
  %r = tile.arange : tensor<256xi32>
  %x = tile.load %p[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  tile.store %s[%r], %x : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  tile.barrier
  %y = tile.load %s[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  tile.store %p[%r], %y : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  return
}

// -----

// An asynchronous copy into a shared array becomes a per-thread
// simt.copy_async; commit and wait stay for the emitter.
// CHECK-LABEL: func.func @copy_async(
// CHECK:         simt.copy_async %{{.*}}[%{{.*}}], %arg0[%{{.*}}] : !tile.ptr<f32>[vector<2xi32>], !tile.ptr<f32>[vector<2xi32>]
// CHECK:         tile.copy_commit
// CHECK:         tile.copy_wait {pending = 0 : i64}
// CHECK:         tile.copy_wait {lane_only, pending = 0 : i64}
func.func @copy_async(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 1024 : i64} {
  %s = tile.shared_alloc {offset = 0 : i64, size = 256 : i64} : !tile.ptr<f32>
  %r = tile.arange : tensor<256xi32>
  tile.copy_async %s[%r], %p[%r] : !tile.ptr<f32>[tensor<256xi32>], !tile.ptr<f32>[tensor<256xi32>]
  tile.copy_commit
  tile.copy_wait {pending = 0 : i64}
  tile.copy_wait {lane_only, pending = 0 : i64}
  %y = tile.load %s[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  tile.store %p[%r], %y : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  return
}

// -----

func.func @copy_between_types(%q: !tile.ptr<bf16>) attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 1024 : i64} {
  %s = tile.shared_alloc {offset = 0 : i64, size = 256 : i64} : !tile.ptr<f32>
  %r = tile.arange : tensor<256xi32>
  // expected-error @+1 {{copies between pointers of one element type}}
  tile.copy_async %s[%r], %q[%r] : !tile.ptr<f32>[tensor<256xi32>], !tile.ptr<bf16>[tensor<256xi32>]
  return
}

// -----

func.func @copy_to_global(%p: !tile.ptr<f32>, %q: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %r = tile.arange : tensor<256xi32>
  // expected-error @+1 {{the destination must point into a tile.shared_alloc}}
  tile.copy_async %p[%r], %q[%r] : !tile.ptr<f32>[tensor<256xi32>], !tile.ptr<f32>[tensor<256xi32>]
  return
}

// -----

func.func @past_the_end() attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 1024 : i64} {
  // expected-error @+1 {{ends at byte 1040, past the kernel's 'tile.shared_bytes'}}
  %s = tile.shared_alloc {offset = 16 : i64, size = 256 : i64} : !tile.ptr<f32>
  return
}

// -----

func.func @misaligned() attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 4096 : i64} {
  // expected-error @+1 {{offset 8 is not 16-byte aligned}}
  %s = tile.shared_alloc {offset = 8 : i64, size = 256 : i64} : !tile.ptr<f32>
  return
}

// -----

func.func @in_a_loop(%n: i32) attributes {tile.kernel, tile.num_warps = 4 : i64, tile.shared_bytes = 1024 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    // expected-error @+1 {{must be in the kernel's top-level block}}
    %s = tile.shared_alloc {offset = 0 : i64, size = 16 : i64} : !tile.ptr<f32>
  }
  return
}

// -----

// An L2 prefetch takes scalars and stays as it is for the emitter.
// CHECK-LABEL: func.func @prefetch(
// CHECK:         tile.prefetch_l2 %arg0[%{{.*}}, %{{.*}}] : !tile.ptr<bf16>, i32, i32
func.func @prefetch(%p: !tile.ptr<bf16>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %c0 = arith.constant 0 : i32
  tile.prefetch_l2 %p[%c0, %n] : !tile.ptr<bf16>, i32, i32
  return
}
