// RUN: tilejit-opt %s --tile-copy-ahead --verify-diagnostics

// At most 7 copy groups can be waited for (cp.async.wait_group's range).
// expected-error @+1 {{tile.copy_ahead = 9: copies run 1 to 7 iterations ahead}}
func.func @too_far(%x: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64, tile.copy_ahead = 9 : i64} {
  return
}
