//===- RowLoss.h - what the one-program-per-row losses share ----*- C++ -*-===//
//
// The row losses (cross_entropy, kl_div, jsd, jsd_logits, ce_tvd_loss_grad)
// walk a row of V elements in BLOCK_SIZE tiles, one program per row: their
// tunable parameters, and the output of a row that takes no part in the
// loss (an ignored label): loss 0 and a zero gradient row.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_ROWLOSS_H
#define TILEJIT_KERNELS_SPEC_ROWLOSS_H

#include "tilejit/KernelSpec.h"

#include <initializer_list>
#include <vector>

namespace tilejit {

/// BLOCK_SIZE and num_warps, then `extra` (switches of the kernel's own).
inline std::vector<ParamSpec>
rowLossParams(std::initializer_list<ParamSpec> extra = {}) {
  std::vector<ParamSpec> p = {
      {"BLOCK_SIZE", {1024, 2048, 4096, 8192}, 2048, "vocab elements per tile"},
      {"num_warps", {4, 8, 16}, 8, "warps per program"}};
  p.insert(p.end(), extra);
  return p;
}

/// HAS_LABEL: whether the kernel reads labels and skips ignore_index rows.
inline ParamSpec hasLabelParam() {
  return {"HAS_LABEL", {1, 0}, 1, "read labels, skip ignore_index rows", false};
}

/// Zeros in `losses` at `row` and in the V gradient elements at `grad`.
inline void storeIgnoredRow(dsl::KernelBuilder &k,
                            std::initializer_list<dsl::Value> losses,
                            dsl::Value row, dsl::Value grad, dsl::Value V,
                            DType gradType) {
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  for (dsl::Value loss : losses)
    k.store(loss, row, k.constant(0, DType::F32));
  k.forRange(0, V, BLOCK, [&](dsl::Value i) {
    dsl::Value offs = i + k.arange(BLOCK);
    k.store(grad, offs, k.full(BLOCK, k.constant(0, gradType)), offs < V);
  });
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_ROWLOSS_H
