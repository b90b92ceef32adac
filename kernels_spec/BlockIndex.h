//===- BlockIndex.h - row and column of each element of a block -*- C++ -*-===//
//
// Tile `dot` takes row-major matrices held in 1-D tiles: element (i, j) of an
// R x C block is tile element i * C + j. These give i and j of every element,
// for building the load offsets of a block.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_BLOCKINDEX_H
#define TILEJIT_KERNELS_SPEC_BLOCKINDEX_H

#include "tilejit/DSL.h"

namespace tilejit {

/// The row of each element of a row-major block of n elements, `cols` wide.
inline dsl::Value blockRow(dsl::KernelBuilder &k, int64_t n, int64_t cols) {
  return k.arange(n) / double(cols);
}

/// The column of each element of the same block.
inline dsl::Value blockCol(dsl::KernelBuilder &k, int64_t n, int64_t cols) {
  dsl::Value i = k.arange(n);
  return i - (i / double(cols)) * double(cols);
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_BLOCKINDEX_H
