// RUN: tilejit-opt %s --tile-assign-layout --tile-lower-to-simt --split-input-file --verify-diagnostics

// The lowering holds N / P elements per thread in registers: beyond 256 it
// rejects the tile instead of allocating N / P values per thread.
func.func @huge_arange(%p: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  // expected-error @+1 {{in kernel 'huge_arange': tile type 'tensor<1099511627776xi32>' holds 8589934592 elements per thread over 128 threads; at most 256 are supported}}
  %r = tile.arange : tensor<1099511627776xi32>
  return
}

// -----

// 2^32 elements: their i32 indices would wrap.
func.func @wrapping_arange(%p: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 32 : i64} {
  // expected-error @+1 {{in kernel 'wrapping_arange': tile type 'tensor<4294967296xi32>' holds 4194304 elements per thread over 1024 threads; at most 256 are supported}}
  %r = tile.arange : tensor<4294967296xi32>
  return
}

// -----

// Rows of 256 span 64 lanes: the matrix would go through shared memory,
// and 64 KiB does not fit.
func.func @rows_beyond_a_warp(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 2 : i64} {
  %a = tile.arange : tensor<16384xi32>
  %x = tile.load %p[%a] : !tile.ptr<f32>[tensor<16384xi32>] -> tensor<16384xf32>
  // expected-error @+1 {{'tile.reduce_rows' op needs the 16384-element matrix in shared memory (rows of 256 columns are not whole groups of 4 elements in lanes of one warp), at most 32 KiB}}
  %s = tile.reduce_rows sum %x {cols = 256 : i64} : tensor<16384xf32> -> tensor<64xf32>
  %r = tile.arange : tensor<64xi32>
  tile.store %p[%r], %s : !tile.ptr<f32>[tensor<64xi32>], tensor<64xf32>
  return
}
