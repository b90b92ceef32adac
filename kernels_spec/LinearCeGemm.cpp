//===- LinearCeGemm.cpp - the chunk loop's GEMMs written in the DSL -------===//
//
// lce_gemm: C = alpha op(A) op(B) + beta C with tile `dot` (tensor cores),
// the chunk loop's alternative to cuBLASLt. Program (i, j) of a 2-D grid
// owns the BLOCK_M x BLOCK_N block of C at (i BLOCK_M, j BLOCK_N) and walks
// K in BLOCK_K steps, loading blocks of op(A) and op(B) through tensor
// descriptors (TRANS_A / TRANS_B swap a view's strides); the compiler
// pipelines that loop (tile-pipeline-dot). C_F32 picks an f32 or an
// input-dtype C.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/GemmProgram.h"
#include "kernels_spec/LinearCe.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildGemm(const Config &cfg) {
  KernelBuilder k("lce_gemm", cfg);
  const bool TRANS_A = k.param("TRANS_A"), TRANS_B = k.param("TRANS_B");
  Value A = k.pointerArg("A", cfg.dtype);
  Value B = k.pointerArg("B", cfg.dtype);
  Value C = k.pointerArg("C", k.param("C_F32") ? DType::F32 : cfg.dtype);
  Value M = k.scalarArg("M", DType::I32);
  Value N = k.scalarArg("N", DType::I32);
  Value K = k.scalarArg("K", DType::I32);
  Value lda = k.scalarArg("lda", DType::I64);
  Value ldb = k.scalarArg("ldb", DType::I64);
  Value ldc = k.scalarArg("ldc", DType::I64);
  Value alpha = k.scalarArg("alpha", DType::F32);
  Value beta = k.scalarArg("beta", DType::F32);

  TensorDescriptor opA = matrixView(k, A, M, K, lda, TRANS_A);
  TensorDescriptor opB = matrixView(k, B, K, N, ldb, TRANS_B);
  GemmBlock b = gemmBlock(k, opA, opB, K);
  Value acc = b.acc, cRow = b.row, cCol = b.col;
  Value inC = cRow < M && cCol < N;
  Value cOffs = cRow.to(DType::I64) * ldc + cCol.to(DType::I64);
  // beta = 0 must not read C: it may hold anything, NaN included.
  Value old = k.load(C, cOffs, inC && beta != 0.0, 0.0).to(DType::F32);
  k.store(C, cOffs, alpha * acc + beta * old, inC);
  return k.finish();
}

/// C = alpha op(A) op(B) in fp64 (the CLI runs beta = 0), A and B read
/// with the leading dimensions the launch passes.
void gemmReference(ReferenceArgs &r) {
  const HostTensor &a = r.in("A"), &b = r.in("B");
  const int64_t M = r.size("M"), N = r.size("N"), K = r.size("K");
  const bool ta = r.scalar("TRANS_A") != 0, tb = r.scalar("TRANS_B") != 0;
  const int64_t lda = int64_t(r.scalar("lda")), ldb = int64_t(r.scalar("ldb"));
  const double alpha = r.scalar("alpha");
  std::vector<double> &c = r.out("C");
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += a[ta ? k * lda + i : i * lda + k] *
               b[tb ? j * ldb + k : k * ldb + j];
      c[i * N + j] = alpha * sum;
    }
}

/// The leading dimensions of contiguous A (M x K, or K x M with TRANS_A),
/// B (K x N, or N x K) and C (M x N) at a launch shape, for `tilejit run`.
void gemmLeadingDims(Config &c, const std::map<std::string, int64_t> &shape) {
  auto M = shape.find("M"), N = shape.find("N"), K = shape.find("K");
  if (M == shape.end() || N == shape.end() || K == shape.end())
    return;
  c.params["lda"] = c.get("TRANS_A") ? M->second : K->second;
  c.params["ldb"] = c.get("TRANS_B") ? K->second : N->second;
  c.params["ldc"] = N->second;
}

} // namespace

std::vector<ParamSpec> gemmScheduleParams() {
  return {
      {"BLOCK_M", {64, 128}, 128, "rows of C per program"},
      {"BLOCK_N", {64, 128, 256}, 256, "columns of C per program"},
      {"BLOCK_K", {32, 64}, 64, "K per dot step"},
      {"num_warps", {4, 8}, 8, "warps per program"},
      {"DOT_STAGES", {2, 3, 4}, 4,
       "blocks of A and B in flight in shared memory"},
      {"DOT_SPECIALIZE", {0, 1}, 1,
       "sm_90, views the copy engine cannot read: one warpgroup copies, the "
       "other multiplies (8 warps)"},
      {"GROUP_M", {1, 8}, 8,
       "row blocks of C per group of programs sharing L2"}};
}

KernelSpec linearCeGemmSpec() {
  KernelSpec s;
  s.name = "lce_gemm";
  s.summary = "linear CE chunk GEMM in the DSL: C = alpha op(A) op(B) + beta C "
              "(tile dot)";
  s.params = gemmScheduleParams();
  // Not tuned: correct on the GPU but 0.44-0.76x as fast as RESIDENT=0
  // (its loop over programs makes ptxas spill 2.2 KB per thread).
  s.params.push_back({"RESIDENT", {0, 1}, 0,
                      "sm_90, views the copy engine reads: one block per SM "
                      "runs the programs in turn, filling the next one's "
                      "first blocks during the epilogue",
                      false});
  s.params.insert(s.params.end(), {
      // The problem, not its schedule: never tuned.
      {"TRANS_A", {0, 1}, 0, "op(A) = A^T", false},
      {"TRANS_B", {0, 1}, 0, "op(B) = B^T", false},
      {"C_F32", {0, 1}, 1, "C in f32 (1) or the input dtype (0)", false}});
  s.dtypes = {DType::BF16, DType::F16};
  s.build = buildGemm;
  s.tuneKey = {{"M", false}, {"N", false}, {"K", false}};
  s.deriveParams = gemmLeadingDims;
  using A = ArgSpec;
  s.run.sizes = {{"M", "rows of C"}, {"N", "columns of C"}, {"K", "the sum's length"}};
  s.run.grid = {"M/BLOCK_M", "N/BLOCK_N"};
  // f32 sums of K products of exact bf16/f16 inputs, in another order than
  // the reference's; C may then be rounded to the input dtype.
  s.run.args = {A::input("A", {"M", "K"}, ArgFill::normal()),
                A::input("B", {"K", "N"}, ArgFill::normal()),
                A::output("C", {"M", "N"}, {1e-3, 1e-4}),
                A::sizeScalar("M", "M"),
                A::sizeScalar("N", "N"),
                A::sizeScalar("K", "K"),
                A::scalar("lda", 0, 0),
                A::scalar("ldb", 0, 0),
                A::scalar("ldc", 0, 0),
                A::scalar("alpha", 1),
                A::scalar("beta", 0, 0, 0)};
  s.run.reference = gemmReference;
  s.run.gemm = RunSpec::Gemm{};
  return s;
}

} // namespace tilejit
