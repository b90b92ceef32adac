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

/// A distillation kernel's arguments (kl_div, jsd, jsd_logits) and this
/// program's row. The arguments, in order: `student` and `teacher` (rows V
/// apart, in the kernel's dtype), label (i64), loss (f32), grad (may be the
/// student: each element is read, then written), upstream (f32), the
/// kernel's own scalars (declared by `ownScalars`), ignore_index,
/// per_row_upstream and V. `s`, `t` and `g` point at the row; `ignored`
/// says whether its label is ignore_index (never without HAS_LABEL).
struct DistillationRow {
  dsl::Value row, s, t, g, loss, upstream, perRow, V, ignored;
};
inline DistillationRow
distillationRow(dsl::KernelBuilder &k, const char *student,
                const char *teacher, const std::function<void()> &ownScalars) {
  DType dtype = k.config().dtype;
  dsl::Value S = k.aliasedPointerArg(student, dtype);
  dsl::Value T = k.pointerArg(teacher, dtype);
  dsl::Value label = k.pointerArg("label", DType::I64);
  DistillationRow r;
  r.loss = k.pointerArg("loss", DType::F32);
  dsl::Value grad = k.aliasedPointerArg("grad", dtype);
  r.upstream = k.pointerArg("upstream", DType::F32);
  ownScalars();
  dsl::Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  r.perRow = k.scalarArg("per_row_upstream", DType::I32) != 0.0;
  r.V = k.scalarArg("V", DType::I32);
  r.row = k.programId(0);
  dsl::Value offset = r.row.to(DType::I64) * r.V.to(DType::I64);
  r.s = S + offset, r.t = T + offset, r.g = grad + offset;
  r.ignored = k.param("HAS_LABEL") ? k.load(label, r.row) == ignoreIndex
                                   : k.constant(0, DType::I1);
  return r;
}

/// `tilejit run`'s arguments of a distillationRow kernel, in its order:
/// `student` and `teacher` filled with `fill`, labels with every 7th row
/// ignored, loss and grad checked within `lossTol` and `gradTol`, upstream
/// factors around 1, the kernel's `own` scalars, ignore_index -100,
/// per_row_upstream 1 and V.
inline std::vector<ArgSpec> distillationRunArgs(const char *student,
                                                const char *teacher,
                                                ArgFill fill, Tolerance lossTol,
                                                Tolerance gradTol,
                                                std::vector<ArgSpec> own) {
  using A = ArgSpec;
  std::vector<ArgSpec> args = {
      A::input(student, {"BT", "V"}, fill),
      A::input(teacher, {"BT", "V"}, fill),
      A::input("label", {"BT"}, ArgFill::classIndex("V", 7, -100)),
      A::output("loss", {"BT"}, lossTol),
      A::output("grad", {"BT", "V"}, gradTol),
      A::input("upstream", {"BT"}, ArgFill::normal(0.5, 1))};
  args.insert(args.end(), own.begin(), own.end());
  args.insert(args.end(), {A::scalar("ignore_index", -100),
                           A::scalar("per_row_upstream", 1, 0, 1),
                           A::sizeScalar("V", "V")});
  return args;
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
