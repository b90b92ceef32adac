//===- CudaEmitterTest.cpp - SIMT-level MLIR to CUDA C++ ------------------===//
//
// Hand-written SIMT-level kernels (the form tile-lower-to-simt + canonicalize
// + cse produce) are printed as CUDA C++, checked for the expected constructs,
// and compiled with NVRTC for sm_90 (PTX checked by ptxas). Needs the CUDA
// toolkit but no GPU.
//
//===----------------------------------------------------------------------===//
#include "tilejit/codegen/CudaEmitter.h"

#include "codegen/Nvrtc.h"
#include "tilejit/Error.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

using namespace tilejit;

namespace {

class CudaEmitterTest : public ::testing::Test {
protected:
  CudaEmitterTest() {
    mlir::DialectRegistry registry;
    registerTilejitDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  mlir::OwningOpRef<mlir::ModuleOp> parse(const char *text) {
    std::string diag;
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      diag += d.str() + "\n";
      return mlir::success();
    });
    auto m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(m) << diag;
    return m;
  }

  /// Emits, compiles with NVRTC for sm_90 and checks the PTX with ptxas.
  std::string emitAndCompile(const char *text, const std::string &kernel) {
    auto m = parse(text);
    if (!m)
      return "";
    std::string cuda = emitCuda(*m);
    nvrtc::CompileResult r;
    try {
      r = nvrtc::compile(cuda, kernel + ".cu", "sm_90");
    } catch (const Error &e) {
      ADD_FAILURE() << e.what() << "\n--- source ---\n" << cuda;
      return cuda;
    }
    EXPECT_NE(r.ptx.find(".entry " + kernel), std::string::npos);
    EXPECT_FALSE(r.cubin.empty());
    std::string log;
    EXPECT_TRUE(nvrtc::ptxasAccepts(r.ptx, "sm_90", &log)) << log;
    return cuda;
  }

  mlir::MLIRContext ctx;
};

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// One row per program: a masked bf16 vector load in an scf.for that carries a
// scalar and a vector, exp, vector.reduction, block reductions, and a scalar
// store of the result. P = 128 threads, 4 elements per thread (tile of 512).
const char *kRowSum = R"mlir(
func.func @row_sum(%x: !tile.ptr<bf16>, %out: !tile.ptr<f32>, %n: i32)
    attributes {tile.kernel, tile.num_warps = 4 : i64, simt.threads = 128 : i64} {
  %c0 = arith.constant 0 : i32
  %c4 = arith.constant 4 : i32
  %c512 = arith.constant 512 : i32
  %iota = arith.constant dense<[0, 1, 2, 3]> : vector<4xi32>
  %zero = arith.constant 0.0 : f32
  %zv = arith.constant dense<0.0> : vector<4xf32>
  %ninf = arith.constant dense<0xFF800000> : vector<4xf32>
  %other = arith.constant 0.0 : bf16
  %pid = simt.block_id 0 : i32
  %tid = simt.thread_id : i32
  %base = arith.muli %tid, %c4 : i32
  %bv = vector.broadcast %base : i32 to vector<4xi32>
  %idx = arith.addi %bv, %iota : vector<4xi32>
  %row = arith.muli %pid, %n : i32
  %rowptr = tile.addptr %x, %row : !tile.ptr<bf16>, i32
  %nv = vector.broadcast %n : i32 to vector<4xi32>
  %res:3 = scf.for %i = %c0 to %n step %c512
      iter_args(%acc = %zero, %vacc = %zv, %vmax = %ninf) -> (f32, vector<4xf32>, vector<4xf32>) : i32 {
    %iv = vector.broadcast %i : i32 to vector<4xi32>
    %offs = arith.addi %iv, %idx : vector<4xi32>
    %m = arith.cmpi slt, %offs, %nv : vector<4xi32>
    %xv = simt.load %rowptr[%offs] mask %m other %other : !tile.ptr<bf16>[vector<4xi32>] mask vector<4xi1> other bf16 -> vector<4xbf16>
    %xf = arith.extf %xv : vector<4xbf16> to vector<4xf32>
    %e = math.exp %xf : vector<4xf32>
    %em = arith.select %m, %e, %zv : vector<4xi1>, vector<4xf32>
    %s = vector.reduction <add>, %em : vector<4xf32> into f32
    %acc2 = arith.addf %acc, %s : f32
    %vacc2 = arith.addf %vacc, %em : vector<4xf32>
    %vmax2 = arith.maximumf %vmax, %xf : vector<4xf32>
    scf.yield %acc2, %vacc2, %vmax2 : f32, vector<4xf32>, vector<4xf32>
  }
  %t = simt.block_reduce sum %res#0 : f32
  %vs = vector.reduction <add>, %res#1 : vector<4xf32> into f32
  %ts = simt.block_reduce sum %vs : f32
  %vm = vector.reduction <maximumf>, %res#2 : vector<4xf32> into f32
  %mx = simt.block_reduce max %vm : f32
  %r0 = arith.addf %t, %ts : f32
  %r = arith.addf %r0, %mx : f32
  simt.store %out[%pid], %r : !tile.ptr<f32>[i32], f32
  return
}
)mlir";

TEST_F(CudaEmitterTest, RowSumKernelHasExpectedConstructsAndCompiles) {
  std::string cuda = emitAndCompile(kRowSum, "row_sum");
  // No toolkit headers: the prelude defines the bf16/f16 types itself.
  EXPECT_FALSE(contains(cuda, "#include")) << cuda;
  EXPECT_TRUE(contains(cuda, "struct __align__(2) __nv_bfloat16"));
  EXPECT_FALSE(contains(cuda, "stdint.h"));
  EXPECT_TRUE(contains(cuda, "// tilejit: row_sum, 128 threads\n"));
  EXPECT_TRUE(contains(cuda,
                       "extern \"C\" __global__ void __launch_bounds__(128)\n"
                       "row_sum(__nv_bfloat16 *__restrict__ v0, "
                       "float *__restrict__ v1, int v2) {"))
      << cuda;
  // The prelude's block reduction: shuffles, shared partials, two barriers.
  EXPECT_TRUE(contains(cuda, "__shfl_xor_sync(0xffffffffu"));
  EXPECT_TRUE(contains(cuda, "__shared__ T tj_partials[32];"));
  // Constants, including a non-splat vector and -inf.
  EXPECT_TRUE(contains(cuda, "int v6[4] = {0, 1, 2, 3};")) << cuda;
  EXPECT_TRUE(contains(cuda, "__uint_as_float(0xff800000u)"));
  EXPECT_TRUE(contains(cuda, "(int)threadIdx.x"));
  EXPECT_TRUE(contains(cuda, "(int)blockIdx.x"));
  EXPECT_TRUE(contains(cuda, "__nv_bfloat16 *v17 = v0 + v16;")) << cuda;
  // The loop: carried values declared before it, the induction variable.
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(float v\d+ = v7;\n\s*float v\d+\[4\];)")))
      << cuda;
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(for \(int v\d+ = v3; v\d+ < v2; v\d+ \+= v5\) \{)")))
      << cuda;
  // Unrolled element loops, masked load with `other`, exp through float.
  EXPECT_TRUE(contains(cuda, "#pragma unroll\n"));
  EXPECT_TRUE(contains(cuda, "for (int e = 0; e < 4; ++e)\n"));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(v\d+\[e\] = v\d+\[e\] \? v17\[v\d+\[e\]\] : v10;)")))
      << cuda;
  // bf16 pairs widen from their 32-bit words.
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(v\d+\[e\] = tj_bf16_at\(v\d+, e\);)")));
  EXPECT_TRUE(
      std::regex_search(cuda, std::regex(R"(v\d+\[e\] = expf\(v\d+\[e\]\);)")));
  EXPECT_FALSE(contains(cuda, "tj_fast_exp(v"));
  EXPECT_TRUE(contains(cuda, "tj_maximumf("));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(float v\d+ = tj_block_sum<128>\(v\d+\);)")));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(float v\d+ = tj_block_max<128>\(v\d+\);)")));
  // The scalar store is done by thread 0 only.
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(\n  if \(threadIdx.x == 0\) v1\[v11\] = v\d+;\n)")))
      << cuda;
}

// scf.if with scalar and vector results, and a loop whose yield swaps its
// carried values (needs temporaries), with i64 induction variable.
const char *kIfAndSwap = R"mlir(
func.func @if_swap(%p: !tile.ptr<f32>, %q: !tile.ptr<i32>, %n: i64, %s: f32)
    attributes {tile.kernel, tile.num_warps = 1 : i64, simt.threads = 32 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c0i = arith.constant 0 : i32
  %one = arith.constant 1.0 : f32
  %tid = simt.thread_id : i32
  %t64 = arith.extsi %tid : i32 to i64
  %c2 = arith.constant 2 : i64
  %b = arith.muli %t64, %c2 : i64
  %bv = vector.broadcast %b : i64 to vector<2xi64>
  %iota = arith.constant dense<[0, 1]> : vector<2xi64>
  %offs = arith.addi %bv, %iota : vector<2xi64>
  %x = simt.load %p[%offs] : !tile.ptr<f32>[vector<2xi64>] -> vector<2xf32>
  %pos = arith.cmpf ogt, %s, %one : f32
  %r:2 = scf.if %pos -> (f32, vector<2xf32>) {
    %y = arith.mulf %x, %x : vector<2xf32>
    scf.yield %s, %y : f32, vector<2xf32>
  } else {
    %y = arith.negf %x : vector<2xf32>
    scf.yield %one, %y : f32, vector<2xf32>
  }
  %l:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %r#0, %bb = %one) -> (f32, f32) : i64 {
    %a2 = arith.addf %a, %bb : f32
    scf.yield %bb, %a2 : f32, f32
  }
  %sum = vector.reduction <add>, %r#1, %l#0 : vector<2xf32> into f32
  %bs = simt.block_reduce sum %sum : f32
  %xi = arith.fptosi %x : vector<2xf32> to vector<2xi32>
  %mi = vector.reduction <maxsi>, %xi : vector<2xi32> into i32
  %bm = simt.block_reduce max %mi : i32
  %bn = simt.block_reduce min %mi : i32
  %d = arith.subi %bm, %bn : i32
  simt.store %q[%c0i], %d : !tile.ptr<i32>[i32], i32
  %bsv = vector.broadcast %bs : f32 to vector<2xf32>
  simt.store %p[%offs], %bsv : !tile.ptr<f32>[vector<2xi64>], vector<2xf32>
  return
}
)mlir";

TEST_F(CudaEmitterTest, IfWithResultsAndSwappingLoopCompile) {
  std::string cuda = emitAndCompile(kIfAndSwap, "if_swap");
  // Results of scf.if are declared before it and assigned in both branches.
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(R"(float (v\d+);\n\s*float (v\d+)\[2\];\n\s*if \(v\d+\) \{)")))
      << cuda;
  EXPECT_TRUE(contains(cuda, "} else {"));
  // The swap goes through temporaries.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      cuda, m,
      std::regex(
          R"(float (v\d+) = (v\d+);\n\s*float (v\d+) = (v\d+);\n\s*(v\d+) = (v\d+);\n\s*(v\d+) = (v\d+);)")))
      << cuda;
  // tmp1 = bb; tmp2 = a2; a = tmp1; bb = tmp2;
  EXPECT_EQ(m[6], m[1]);
  EXPECT_EQ(m[7], m[2]);
  EXPECT_EQ(m[8], m[3]);
  EXPECT_TRUE(contains(cuda, "for (long long "));
  // Block-wide reductions of i32 and 32 threads (a single warp).
  EXPECT_TRUE(contains(cuda, "tj_block_max<32>("));
  EXPECT_TRUE(contains(cuda, "tj_block_min<32>("));
  // Reduction with an accumulator operand starts from it.
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(
          R"(float (v\d+) = v\d+;\n\s*#pragma unroll\n\s*for \(int e = 0; e < 2; \+\+e\)\n\s*\1 = \1 \+ v\d+\[e\];)")))
      << cuda;
  // Unmasked vector store, every thread.
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(\n\s+v0\[v\d+\[e\]\] = v\d+\[e\];)")))
      << cuda;
}

// bf16: f32 math truncated to bf16 and stored under a mask; f16 too; i64
// offsets; #line directives from file locations.
const char *kBf16Store = R"mlir(
func.func @to_bf16(%x: !tile.ptr<f32>, %y: !tile.ptr<bf16>, %h: !tile.ptr<f16>, %n: i64)
    attributes {tile.kernel, tile.num_warps = 2 : i64, simt.threads = 64 : i64} {
  %c8 = arith.constant 8 : i64
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi64>
  %half = arith.constant dense<5.000000e-01> : vector<8xf32>
  %tid = simt.thread_id : i32
  %t64 = arith.extsi %tid : i32 to i64
  %b = arith.muli %t64, %c8 : i64
  %bv = vector.broadcast %b : i64 to vector<8xi64>
  %offs = arith.addi %bv, %iota : vector<8xi64>
  %nv = vector.broadcast %n : i64 to vector<8xi64>
  %m = arith.cmpi slt, %offs, %nv : vector<8xi64>
  %v = simt.load %x[%offs] mask %m : !tile.ptr<f32>[vector<8xi64>] mask vector<8xi1> -> vector<8xf32> loc("specs/to_bf16.cpp":12:5)
  %w = arith.mulf %v, %half : vector<8xf32> loc("specs/to_bf16.cpp":13:9)
  %bf = arith.truncf %w : vector<8xf32> to vector<8xbf16> loc("specs/to_bf16.cpp":14:3)
  simt.store %y[%offs], %bf mask %m : !tile.ptr<bf16>[vector<8xi64>], vector<8xbf16> mask vector<8xi1> loc("specs/to_bf16.cpp":14:3)
  %bf2 = arith.addf %bf, %bf : vector<8xbf16> loc(fused["specs/to_bf16.cpp":15:3, "x"])
  %hf = arith.truncf %w : vector<8xf32> to vector<8xf16>
  %hf2 = arith.mulf %hf, %hf : vector<8xf16>
  simt.store %h[%offs], %hf2 mask %m : !tile.ptr<f16>[vector<8xi64>], vector<8xf16> mask vector<8xi1>
  %back = arith.extf %bf2 : vector<8xbf16> to vector<8xf32>
  simt.store %x[%offs], %back mask %m : !tile.ptr<f32>[vector<8xi64>], vector<8xf32> mask vector<8xi1>
  return
}
)mlir";

TEST_F(CudaEmitterTest, Bf16TruncStoreAndLineDirectivesCompile) {
  std::string cuda = emitAndCompile(kBf16Store, "to_bf16");
  EXPECT_TRUE(contains(cuda, "__nv_bfloat16 *__restrict__ v1,")) << cuda;
  EXPECT_TRUE(contains(cuda, "__half *__restrict__ v2,"));
  EXPECT_TRUE(contains(cuda, "long long v3) {"));
  EXPECT_TRUE(contains(cuda, "long long v4 = 8LL;"));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(v\d+\[e\] = __float2bfloat16_rn\(v\d+\[e\]\);)")));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(if \(v\d+\[e\]\) v1\[v\d+\[e\]\] = v\d+\[e\];)")))
      << cuda;
  // bf16 arithmetic goes through float.
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(
          R"(= __float2bfloat16_rn\(__bfloat162float\(v\d+\[e\]\) \+ __bfloat162float\(v\d+\[e\]\)\);)")))
      << cuda;
  EXPECT_TRUE(contains(cuda, "__float2half_rn(__half2float("));
  // Masked load without `other` reads zero.
  EXPECT_TRUE(
      std::regex_search(cuda, std::regex(R"(\? v0\[v\d+\[e\]\] : 0.0f;)")))
      << cuda;
  // #line right before the op's main statement (here: the element loop's
  // body); ops without a file location get none.
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(
          R"(#line 12 "specs/to_bf16.cpp"\n    v\d+\[e\] = v\d+\[e\] \? v0)")))
      << cuda;
  // Later directives in the same file leave the file name out.
  EXPECT_TRUE(contains(cuda, "#line 13\n"));
  EXPECT_TRUE(contains(cuda, "#line 15\n"));
  EXPECT_EQ(cuda.find("\"specs/to_bf16.cpp\""),
            cuda.rfind("\"specs/to_bf16.cpp\""));
}

// A vector access whose mask is `m & broadcast(s)` runs under one `if (s)`
// and tests only m per element: with s false (a GEMM's beta = 0) the load
// gives `other` and the store writes nothing, without per-group tests.
const char *kUniformMask = R"mlir(
func.func @guarded(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32, %beta: f32)
    attributes {tile.kernel, tile.num_warps = 1 : i64, simt.threads = 32 : i64} {
  %c4 = arith.constant 4 : i32
  %zero = arith.constant 0.0 : f32
  %iota = arith.constant dense<[0, 1, 2, 3]> : vector<4xi32>
  %tid = simt.thread_id : i32
  %base = arith.muli %tid, %c4 : i32
  %bb = vector.broadcast %base : i32 to vector<4xi32>
  %offs = arith.addi %bb, %iota : vector<4xi32>
  %nb = vector.broadcast %n : i32 to vector<4xi32>
  %in = arith.cmpi slt, %offs, %nb : vector<4xi32>
  %nz = arith.cmpf une, %beta, %zero : f32
  %nzb = vector.broadcast %nz : i1 to vector<4xi1>
  %m = arith.andi %in, %nzb : vector<4xi1>
  %v = simt.load %x[%offs] mask %m other %zero {vec = 4 : i64} : !tile.ptr<f32>[vector<4xi32>] mask vector<4xi1> other f32 -> vector<4xf32>
  simt.store %y[%offs], %v mask %m {vec = 4 : i64} : !tile.ptr<f32>[vector<4xi32>], vector<4xf32> mask vector<4xi1>
  return
}
)mlir";

TEST_F(CudaEmitterTest, UniformMaskFactorGuardsTheWholeAccess) {
  std::string cuda = emitAndCompile(kUniformMask, "guarded");
  std::smatch flag, product;
  ASSERT_TRUE(std::regex_search(cuda, flag,
                                std::regex(R"(bool (v\d+) = v3 != v\d+;)")))
      << cuda;
  ASSERT_TRUE(std::regex_search(
      cuda, product, std::regex(R"((v\d+)\[e\] = v\d+\[e\] & v\d+\[e\];)")))
      << cuda;
  const std::string guard = "if (" + flag[1].str() + ") {";
  // Both the load and the store are guarded ...
  size_t first = cuda.find(guard);
  ASSERT_NE(first, std::string::npos) << cuda;
  EXPECT_NE(cuda.find(guard, first + 1), std::string::npos) << cuda;
  // ... test the other factor per element, not the product ...
  EXPECT_FALSE(contains(cuda, "tj_full && " + product[1].str())) << cuda;
  // ... and without s the load gives `other`.
  EXPECT_TRUE(contains(cuda, "} else {")) << cuda;
}

// An output written in place over an input: both pointers are marked
// tile.may_alias and lose __restrict__; the others keep it.
const char *kInPlace = R"mlir(
func.func @scale_in_place(%x: !tile.ptr<f32> {tile.may_alias}, %y: !tile.ptr<f32> {tile.may_alias}, %s: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 1 : i64, simt.threads = 32 : i64} {
  %tid = simt.thread_id : i32
  %v = simt.load %x[%tid] : !tile.ptr<f32>[i32] -> f32
  %c0 = arith.constant 0 : i32
  %f = simt.load %s[%c0] : !tile.ptr<f32>[i32] -> f32
  %w = arith.mulf %v, %f : f32
  simt.store %y[%tid], %w : !tile.ptr<f32>[i32], f32
  return
}
)mlir";

TEST_F(CudaEmitterTest, AliasedPointersAreNotRestrict) {
  std::string cuda = emitAndCompile(kInPlace, "scale_in_place");
  EXPECT_TRUE(contains(cuda, "float * v0,")) << cuda;
  EXPECT_TRUE(contains(cuda, "float * v1,")) << cuda;
  EXPECT_TRUE(contains(cuda, "float *__restrict__ v2")) << cuda;
}

TEST_F(CudaEmitterTest, LineDirectivesMapNvrtcErrorsToTheSpec) {
  // Each #line makes the next line the op's source line, so the line the
  // compiler reports for a statement is the op's line.
  auto m = parse(kBf16Store);
  ASSERT_TRUE(m);
  std::string cuda = emitCuda(*m);
  std::istringstream in(cuda);
  std::string text, file;
  int presumed = -1;
  std::map<std::string, int> lineOf; // first statement text -> presumed line
  while (std::getline(in, text)) {
    std::smatch d;
    if (std::regex_match(text, d, std::regex(R"re(#line (\d+)( "(.*)")?)re"))) {
      presumed = std::stoi(d[1]);
      if (d[3].matched)
        file = d[3];
      continue;
    }
    if (presumed >= 0 && !lineOf.count(text))
      lineOf[text] = presumed;
    if (presumed >= 0)
      ++presumed;
  }
  auto find = [&](const std::string &re) {
    for (auto &[t, l] : lineOf)
      if (std::regex_search(t, std::regex(re)))
        return l;
    return -1;
  };
  EXPECT_EQ(find(R"(\? v0\[v\d+\[e\]\] : 0.0f;$)"), 12) << cuda; // load
  EXPECT_EQ(find(R"(^    v\d+\[e\] = v\d+\[e\] \* v\d+\[e\];$)"), 13) << cuda;
  EXPECT_EQ(find(R"(= __float2bfloat16_rn\(v\d+\[e\]\);$)"), 14) << cuda;
  EXPECT_EQ(find(R"(^    if \(v\d+\[e\]\) v1\[)"), 14) << cuda; // store
  EXPECT_EQ(find(R"(= __float2bfloat16_rn\(__bfloat162float)"), 15) << cuda;
  EXPECT_EQ(file, "specs/to_bf16.cpp");

  // End to end: break the load's statement; NVRTC blames line 12 of the spec.
  std::string broken = std::regex_replace(
      cuda, std::regex(R"((\? v0\[v\d+\[e\]\] : )0.0f;)"), "$1undefined_tj;");
  ASSERT_NE(broken, cuda);
  try {
    nvrtc::compile(broken, "to_bf16.cu", "sm_90");
    ADD_FAILURE() << "expected an NVRTC error";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "specs/to_bf16.cpp(12): error")) << e.what();
  }
}

// Every cmpf predicate, the conversions and the math functions, to make sure
// each prints as valid CUDA.
const char *kKitchenSink = R"mlir(
func.func @sink(%p: !tile.ptr<f32>, %q: !tile.ptr<i64>, %r: !tile.ptr<i32>, %h: !tile.ptr<f16>, %a: f32, %k: i32, %l: i64)
    attributes {tile.kernel, tile.num_warps = 8 : i64, simt.threads = 256 : i64} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %nan = arith.constant 0x7FC00000 : f32
  %big = arith.constant -2147483648 : i32
  %bigl = arith.constant -9223372036854775808 : i64
  %t = arith.constant true
  %pi = arith.constant 3.14159274 : f32
  %tiny = arith.constant 1.0e-30 : f32
  %hb = arith.constant -2.5 : bf16
  %c1 = arith.cmpf oeq, %a, %pi : f32
  %c2 = arith.cmpf ogt, %a, %pi : f32
  %c3 = arith.cmpf oge, %a, %pi : f32
  %c4 = arith.cmpf olt, %a, %pi : f32
  %c5 = arith.cmpf ole, %a, %pi : f32
  %c6 = arith.cmpf one, %a, %pi : f32
  %c7 = arith.cmpf ord, %a, %nan : f32
  %c8 = arith.cmpf ueq, %a, %pi : f32
  %c9 = arith.cmpf ugt, %a, %pi : f32
  %c10 = arith.cmpf uge, %a, %pi : f32
  %c11 = arith.cmpf ult, %a, %pi : f32
  %c12 = arith.cmpf ule, %a, %pi : f32
  %c13 = arith.cmpf une, %a, %pi : f32
  %c14 = arith.cmpf uno, %a, %nan : f32
  %c15 = arith.cmpf false, %a, %pi : f32
  %c16 = arith.cmpf true, %a, %pi : f32
  %o1 = arith.xori %c1, %c2 : i1
  %o2 = arith.ori %o1, %c3 : i1
  %o3 = arith.andi %o2, %c4 : i1
  %o4 = arith.xori %o3, %c5 : i1
  %o5 = arith.xori %o4, %c6 : i1
  %o6 = arith.xori %o5, %c7 : i1
  %o7 = arith.xori %o6, %c8 : i1
  %o8 = arith.xori %o7, %c9 : i1
  %o9 = arith.xori %o8, %c10 : i1
  %o10 = arith.xori %o9, %c11 : i1
  %o11 = arith.xori %o10, %c12 : i1
  %o12 = arith.xori %o11, %c13 : i1
  %o13 = arith.xori %o12, %c14 : i1
  %o14 = arith.xori %o13, %c15 : i1
  %o15 = arith.xori %o14, %c16 : i1
  %o16 = arith.xori %o15, %t : i1
  %i1 = arith.extui %o16 : i1 to i32
  %i2 = arith.extsi %o16 : i1 to i64
  %i3 = arith.cmpi ult, %k, %big : i32
  %i4 = arith.cmpi sge, %l, %bigl : i64
  %i5 = arith.select %i3, %k, %i1 : i32
  %i6 = arith.divsi %i5, %k : i32
  %i7 = arith.remsi %i6, %k : i32
  %i8 = arith.divui %i7, %k : i32
  %i9 = arith.extui %i8 : i32 to i64
  %i10 = arith.addi %i9, %i2 : i64
  %i11 = arith.trunci %i10 : i64 to i32
  %i12 = arith.maxsi %i11, %k : i32
  %i13 = arith.minui %i12, %k : i32
  %i14 = arith.shli %i13, %k : i32
  %i15 = arith.shrui %i14, %k : i32
  %i16 = arith.shrsi %i15, %k : i32
  %i17 = arith.index_cast %i16 : i32 to index
  %i18 = arith.index_cast %i17 : index to i64
  %f1 = arith.sitofp %i16 : i32 to f32
  %f2 = arith.uitofp %i18 : i64 to f32
  %f3 = arith.sitofp %i18 : i64 to bf16
  %f4 = arith.uitofp %i16 : i32 to f16
  %f5 = arith.extf %f3 : bf16 to f32
  %f6 = arith.extf %f4 : f16 to f32
  %f7 = arith.subf %f1, %f2 : f32
  %f8 = arith.divf %f7, %f5 : f32
  %f9 = arith.minimumf %f8, %f6 : f32
  %f10 = arith.maxnumf %f9, %a : f32
  %f11 = arith.minnumf %f10, %tiny : f32
  %f12 = math.exp2 %f11 : f32
  %f13 = math.log %f12 : f32
  %f14 = math.log2 %f13 : f32
  %f15 = math.absf %f14 : f32
  %f16 = math.tanh %f15 : f32
  %f17 = math.sqrt %f16 : f32
  %f18 = math.rsqrt %f17 : f32
  %f19 = arith.negf %f18 : f32
  %f20 = math.exp %hb : bf16
  %f21 = arith.extf %f20 : bf16 to f32
  %fe = math.exp %f19 fastmath<afn> : f32
  %fl = math.log %fe fastmath<afn> : f32
  %f22 = arith.addf %fl, %f21 : f32
  %s1 = arith.fptosi %f22 : f32 to i64
  %s2 = arith.fptoui %f22 : f32 to i32
  %s3 = arith.extsi %s2 : i32 to i64
  %s4 = arith.muli %s1, %s3 : i64
  %s5 = arith.select %i4, %s4, %l : i64
  %vb = vector.broadcast %s5 : i64 to vector<1xi64>
  %tid = simt.thread_id : i32
  %ov = vector.broadcast %tid : i32 to vector<1xi32>
  simt.store %q[%ov], %vb : !tile.ptr<i64>[vector<1xi32>], vector<1xi64>
  %bs = simt.block_reduce min %s5 : i64
  %g = simt.grid_dim 1 : i32
  %bz = simt.block_id 2 : i32
  %gz = arith.addi %g, %bz : i32
  %lo = simt.load %r[%gz] mask %t : !tile.ptr<i32>[i32] mask i1 -> i32
  %hs = arith.truncf %f22 : f32 to f16
  simt.store %h[%lo], %hs : !tile.ptr<f16>[i32], f16
  %bsf = arith.sitofp %bs : i64 to f32
  %mx = simt.block_reduce max %bsf : f32
  %bsm = simt.block_reduce min %mx : f32
  simt.store %p[%c0l], %bsm mask %t : !tile.ptr<f32>[i64], f32 mask i1
  %vi = arith.constant dense<[1, 2]> : vector<2xi32>
  %ve = vector.extract %vi[1] : i32 from vector<2xi32>
  %kx = arith.index_cast %k : i32 to index
  %vd = vector.extract %vi[%kx] : i32 from vector<2xi32>
  %vf = vector.from_elements %ve, %vd : vector<2xi32>
  %vm = vector.reduction <minsi>, %vf : vector<2xi32> into i32
  %vbool = arith.constant dense<[true, false]> : vector<2xi1>
  %vx = vector.reduction <or>, %vbool : vector<2xi1> into i1
  %vsel = arith.select %vx, %vm, %k : i32
  simt.store %r[%c0], %vsel : !tile.ptr<i32>[i32], i32
  return
}
)mlir";

TEST_F(CudaEmitterTest, KitchenSinkCompiles) {
  std::string cuda = emitAndCompile(kKitchenSink, "sink");
  EXPECT_TRUE(contains(cuda, "float v9 = __uint_as_float(0x7fc00000u);"))
      << cuda;
  EXPECT_TRUE(contains(cuda, "int v10 = (-2147483647 - 1);"));
  EXPECT_TRUE(contains(cuda, "long long v11 = (-9223372036854775807LL - 1);"));
  EXPECT_TRUE(contains(cuda, "float v13 = 3.14159274f;"));
  EXPECT_TRUE(
      contains(cuda, "__nv_bfloat16 v15 = __float2bfloat16_rn(-2.5f);"));
  EXPECT_TRUE(contains(cuda, "bool v21 = (v4 < v13 || v4 > v13);"));  // one
  EXPECT_TRUE(contains(cuda, "bool v23 = !(v4 < v13 || v4 > v13);")); // ueq
  EXPECT_TRUE(contains(cuda, "bool v29 = (v4 != v4 || v9 != v9);"));  // uno
  EXPECT_TRUE(contains(cuda, "(unsigned)v5 < (unsigned)v10"));
  EXPECT_TRUE(contains(cuda, "(long long)(unsigned)v"));
  EXPECT_TRUE(contains(cuda, "__ll2bfloat16_rn("));
  EXPECT_TRUE(contains(cuda, "__uint2half_rn((unsigned)"));
  EXPECT_TRUE(contains(cuda, "tj_minimumf("));
  EXPECT_TRUE(contains(cuda, "fmaxf("));
  EXPECT_TRUE(contains(cuda, "fminf("));
  for (const char *fn :
       {"exp2f(", "logf(", "log2f(", "fabsf(", "tanhf(", "sqrtf(", "rsqrtf("})
    EXPECT_TRUE(contains(cuda, fn)) << fn;
  EXPECT_TRUE(
      contains(cuda, "__float2bfloat16_rn(expf(__bfloat162float(v15)))"));
  EXPECT_TRUE(contains(cuda, "= tj_fast_exp(v")); // exp with fastmath<afn>
  EXPECT_TRUE(contains(cuda, "= tj_fast_log(v")); // log with fastmath<afn>
  EXPECT_TRUE(contains(cuda, "(int)gridDim.y"));
  EXPECT_TRUE(contains(cuda, "(int)blockIdx.z"));
  EXPECT_TRUE(contains(cuda, "tj_block_min<256>("));
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(int v\d+ = v\d+ \? v2\[v\d+\] : 0;)")))
      << cuda;
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(R"(if \(threadIdx.x == 0 && v12\) v0\[v8\] = v\d+;\n)")))
      << cuda;
  EXPECT_TRUE(
      std::regex_search(cuda, std::regex(R"(v1\[v\d+\[0\]\] = v\d+\[0\];)")))
      << cuda;
  EXPECT_TRUE(std::regex_search(
      cuda,
      std::regex(
          R"(int v\d+ = v\d+\[1\];\n\s*long long (v\d+) = \(long long\)v5;\n\s*int v\d+ = v\d+\[\1\];)")))
      << cuda;
}

// exp2 with fastmath<afn> is one ex2.approx.ftz; a kernel's minimum
// programs per SM is launch bounds' second argument (registers are capped
// so that that many fit), which NVRTC and ptxas accept.
TEST_F(CudaEmitterTest, FastExp2AndMinimumProgramsPerSm) {
  const char *kernel = R"mlir(
func.func @fast_exp2(%p: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 2 : i64, simt.threads = 64 : i64,
                tile.min_programs_per_sm = 3 : i64} {
  %c0 = arith.constant 0 : i32
  %x = simt.load %p[%c0] : !tile.ptr<f32>[i32] -> f32
  %e = math.exp2 %x fastmath<afn> : f32
  simt.store %p[%c0], %e : !tile.ptr<f32>[i32], f32
  return
}
)mlir";
  std::string cuda = emitAndCompile(kernel, "fast_exp2");
  EXPECT_TRUE(contains(cuda, "__launch_bounds__(64, 3)")) << cuda;
  EXPECT_TRUE(contains(cuda, "= tj_fast_exp2(v")) << cuda;
  EXPECT_TRUE(contains(cuda, "float tj_fast_exp2(float x) {")) << cuda;
}

TEST_F(CudaEmitterTest, UnsupportedOpNamesKernelAndOp) {
  auto m = parse(R"mlir(
func.func @still_tiled(%p: !tile.ptr<f32>)
    attributes {tile.kernel, tile.num_warps = 1 : i64, simt.threads = 32 : i64} {
  %c0 = arith.constant 0 : i32
  %x = tile.load %p[%c0] : !tile.ptr<f32>[i32] -> f32 loc("specs/k.cpp":7:3)
  return
}
)mlir");
  ASSERT_TRUE(m);
  try {
    emitCuda(*m);
    FAIL() << "expected tilejit::Error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "still_tiled")) << msg;
    EXPECT_TRUE(contains(msg, "tile.load")) << msg;
    EXPECT_TRUE(contains(msg, "specs/k.cpp:7:3")) << msg;
  }
}

TEST_F(CudaEmitterTest, MissingThreadsAndNoKernelAreErrors) {
  auto m = parse(R"mlir(
func.func @no_layout(%p: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
  return
}
)mlir");
  ASSERT_TRUE(m);
  try {
    emitCuda(*m);
    FAIL() << "expected tilejit::Error";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "no_layout")) << e.what();
    EXPECT_TRUE(contains(e.what(), "simt.threads")) << e.what();
  }
  auto helperOnly = parse("func.func @helper() { return }");
  ASSERT_TRUE(helperOnly);
  EXPECT_THROW(emitCuda(*helperOnly), Error);
}

TEST_F(CudaEmitterTest, SeveralKernelsInOneTranslationUnit) {
  std::string both = std::string(kRowSum) + kIfAndSwap;
  std::string cuda = emitAndCompile(both.c_str(), "row_sum");
  EXPECT_TRUE(contains(cuda, "// tilejit: row_sum, 128 threads"));
  EXPECT_TRUE(contains(cuda, "// tilejit: if_swap, 32 threads"));
  // The prelude appears once.
  EXPECT_EQ(cuda.find("T tj_block_reduce(T x)"),
            cuda.rfind("T tj_block_reduce(T x)"));
}

} // namespace
