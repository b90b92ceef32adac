//===- Upstream.h - a row's upstream gradient factor ------------*- C++ -*-===//
//
// Row-loss kernels scale their gradient by a factor read on the device: per
// row (the backward of reduction none, upstream[row]) or one for every row
// (a reduced loss: upstream[slot], e.g. a mean's 1 / n), so that no call
// waits for the host.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_UPSTREAM_H
#define TILEJIT_KERNELS_SPEC_UPSTREAM_H

#include "tilejit/DSL.h"

namespace tilejit {

/// upstream[row] when perRow, else upstream[slot]: only the one in use is
/// read, so upstream may hold BT factors or slot + 1.
inline dsl::Value upstreamFactor(dsl::KernelBuilder &k, dsl::Value upstream,
                                 dsl::Value row, dsl::Value perRow,
                                 int64_t slot = 0) {
  return k.load(upstream, row, perRow, 0.0) +
         k.load(upstream, k.constant(slot, DType::I32), !perRow, 0.0);
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_UPSTREAM_H
