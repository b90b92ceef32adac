// RUN: tilejit-opt %s --tile-verify --split-input-file --verify-diagnostics

func.func @ok(%p: !tile.ptr<f32>, %n: i32) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  %r = tile.arange : tensor<256xi32>
  %x = tile.load %p[%r] : !tile.ptr<f32>[tensor<256xi32>] -> tensor<256xf32>
  tile.store %p[%r], %x : !tile.ptr<f32>[tensor<256xi32>], tensor<256xf32>
  return
}

// -----

// expected-error @+1 {{kernel 'warps': tile.num_warps must be a power of two in [1, 32]}}
func.func @warps(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 3 : i64} {
  return
}

// -----

func.func @small_tile(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  // expected-error @+1 {{in kernel 'small_tile': tile 'tensor<64xi32>' must be 1-D with a size that is a multiple of 32 * num_warps = 128}}
  %r = tile.arange : tensor<64xi32>
  return
}

// -----

// expected-error @+1 {{kernel 'cluster': tile.cluster_size = 17 is not in [1, 16]}}
func.func @cluster() attributes {tile.kernel, tile.num_warps = 1 : i64, tile.cluster_size = 17 : i64} {
  return
}

// -----

func.func @no_cluster(%x: f32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  // expected-error @+1 {{'tile.cluster_reduce' op is only valid in a kernel with a 'tile.cluster_size' attribute}}
  %r = tile.cluster_reduce sum %x : f32 -> f32
  return
}

// -----

// expected-error @+1 {{kernel 'badarg': argument 0 has type 'f64'}}
func.func @badarg(%x: f64) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  return
}

// -----

func.func @bad_load(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  %r = tile.arange : tensor<32xi32>
  // expected-error @+1 {{value element type 'bf16' differs from the pointer's 'f32'}}
  %x = tile.load %p[%r] : !tile.ptr<f32>[tensor<32xi32>] -> tensor<32xbf16>
  return
}

// -----

func.func @dot_shape(%x: tensor<256xbf16>, %y: tensor<128xbf16>, %z: tensor<128xf32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  // expected-error @+1 {{'tile.dot' op needs M and K multiples of 16 and N of 8, got M = 16, N = 4, K = 16}}
  %r = tile.dot %x, %y, %z {m = 16 : i64, n = 4 : i64, k = 16 : i64} : tensor<256xbf16>, tensor<128xbf16>, tensor<128xf32> -> tensor<128xf32>
  return
}

// -----

func.func @dot_sizes(%x: tensor<256xbf16>, %y: tensor<256xbf16>, %z: tensor<128xf32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  // expected-error @+1 {{'tile.dot' op tile sizes must be M*K, K*N, M*N and M*N for M = 16, N = 8, K = 16}}
  %r = tile.dot %x, %y, %z {m = 16 : i64, n = 8 : i64, k = 16 : i64} : tensor<256xbf16>, tensor<256xbf16>, tensor<128xf32> -> tensor<128xf32>
  return
}

// -----

func.func @rows_size(%x: tensor<256xf32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  // expected-error @+1 {{'tile.reduce_rows' op needs a matrix of 32 x 4 elements, got 256}}
  %r = tile.reduce_rows sum %x {cols = 4 : i64} : tensor<256xf32> -> tensor<32xf32>
  return
}

// -----

// Beyond 256 elements per thread a tile cannot live in registers (and its
// i32 indices would wrap past 2^31 elements).
func.func @huge_tile(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  // expected-error @+1 {{in kernel 'huge_tile': tile 'tensor<1099511627776xi32>' holds 8589934592 elements per thread over 128 threads; at most 256 fit in registers}}
  %r = tile.arange : tensor<1099511627776xi32>
  return
}
