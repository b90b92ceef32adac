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
