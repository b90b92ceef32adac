// RUN: tilejit-opt %s --split-input-file --tile-choose-occupancy | FileCheck %s

// A kept row of 38 KiB per program at 8 warps: 228 KiB / 40 KiB = 5
// programs per SM, which 40 registers per thread still allow (6).
// CHECK-LABEL: func.func @kept(
// CHECK-SAME:      tile.min_programs_per_sm = 5 : i64
func.func @kept() attributes {tile.kernel, tile.num_warps = 8 : i64, tile.keep_row = 1 : i64, tile.shared_bytes = 38912 : i64} {
  return
}

// -----

// A small kept row: the registers' floor (64 K / (256 x 40) = 6) decides.
// CHECK-LABEL: func.func @small(
// CHECK-SAME:      tile.min_programs_per_sm = 6 : i64
func.func @small() attributes {tile.kernel, tile.num_warps = 8 : i64, tile.keep_row = 1 : i64, tile.shared_bytes = 4096 : i64} {
  return
}

// -----

// One program per SM is what the launch gets anyway: nothing to ask.
// CHECK-LABEL: func.func @large(
// CHECK-NOT:       tile.min_programs_per_sm
func.func @large() attributes {tile.kernel, tile.num_warps = 8 : i64, tile.keep_row = 1 : i64, tile.shared_bytes = 155648 : i64} {
  return
}

// -----

// Nothing kept and nothing pinned: ptxas's choice.
// CHECK-LABEL: func.func @plain(
// CHECK-NOT:       tile.min_programs_per_sm
func.func @plain() attributes {tile.kernel, tile.num_warps = 8 : i64} {
  return
}

// -----

// Pinned by PROGRAMS_PER_SM, kept or not.
// CHECK-LABEL: func.func @pinned(
// CHECK-SAME:      tile.min_programs_per_sm = 3 : i64
func.func @pinned() attributes {tile.kernel, tile.num_warps = 8 : i64, tile.programs_per_sm = 3 : i64, tile.keep_row = 1 : i64, tile.shared_bytes = 4096 : i64} {
  return
}

// -----

// The author's own launch bounds stay.
// CHECK-LABEL: func.func @own(
// CHECK-SAME:      tile.min_programs_per_sm = 2 : i64
func.func @own() attributes {tile.kernel, tile.num_warps = 8 : i64, tile.min_programs_per_sm = 2 : i64, tile.keep_row = 1 : i64, tile.shared_bytes = 4096 : i64} {
  return
}
