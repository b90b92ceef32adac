// RUN: tilejit-opt %s --tile-specialize --verify-diagnostics

func.func @missing(%out: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 4 : i64} {
  // expected-error @+1 {{kernel 'missing' has no value for compile-time parameter 'CHUNK'}}
  %b = tile.constexpr "CHUNK" : i32
  %c0 = arith.constant 0 : i32
  tile.store %out[%c0], %b : !tile.ptr<i32>[i32], i32
  return
}
