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

#include <functional>
#include <initializer_list>
#include <string>
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

/// A row loss's spec: one program per row of BT (`tilejit run` grid), V
/// elements each, in bf16, f16 or f32, tuned per BT bucket and V; the
/// caller adds its run arguments and reference.
inline KernelSpec
rowLossSpec(std::string name, std::string summary,
            std::function<TileModule(const dsl::Config &)> build,
            std::initializer_list<ParamSpec> extra = {}) {
  KernelSpec s;
  s.name = std::move(name);
  s.summary = std::move(summary);
  s.params = rowLossParams(extra);
  s.dtypes = {DType::BF16, DType::F16, DType::F32};
  s.build = std::move(build);
  s.tuneKey = {{"BT", true}, {"V", false}};
  s.run.sizes = {{"BT", "tokens (rows)"}, {"V", "vocabulary size", 1}};
  s.run.grid = {"BT"};
  return s;
}

/// The fp64 reference of a distillation kernel (kl_div, jsd, jsd_logits):
/// for each row whose label is not ignore_index (every row without
/// HAS_LABEL), loss[r] = row(s_r, t_r, dloss/ds_r) over the inputs named
/// `student` and `teacher`, and the gradient times the row's upstream
/// factor (upstream[r] with per_row_upstream, else upstream[0]). Other
/// rows keep their zeros.
inline void distillationReference(
    ReferenceArgs &a, const char *student, const char *teacher,
    const std::function<double(const double *, const double *, int64_t,
                               double *)> &row) {
  const HostTensor &s = a.in(student), &t = a.in(teacher),
                   &label = a.in("label"), &up = a.in("upstream");
  int64_t BT = a.size("BT"), V = a.size("V");
  bool hasLabel = a.scalar("HAS_LABEL") != 0;
  bool perRow = a.scalar("per_row_upstream") != 0;
  std::vector<double> &loss = a.out("loss"), &grad = a.out("grad");
  std::vector<double> sr(V), tr(V);
  for (int64_t r = 0; r < BT; ++r) {
    if (hasLabel && label[r] == a.scalar("ignore_index"))
      continue;
    for (int64_t v = 0; v < V; ++v) {
      sr[v] = s[r * V + v];
      tr[v] = t[r * V + v];
    }
    loss[r] = row(sr.data(), tr.data(), V, &grad[r * V]);
    for (int64_t v = 0; v < V; ++v)
      grad[r * V + v] *= up[perRow ? r : 0];
  }
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
