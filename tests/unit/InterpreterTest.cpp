//===- InterpreterTest.cpp - the CPU interpreter of tile kernels ----------===//
#include "tilejit/Interpreter.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using tilejit::DType;
using tilejit::Grid;
using tilejit::InterpArg;
using tilejit::InterpBuffer;

namespace {

struct Parsed {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

std::unique_ptr<Parsed> parse(const std::string &text) {
  auto p = std::make_unique<Parsed>();
  mlir::DialectRegistry registry;
  tilejit::registerTilejitDialects(registry);
  p->ctx.appendDialectRegistry(registry);
  p->ctx.loadAllAvailableDialects();
  p->module = mlir::parseSourceString<mlir::ModuleOp>(text, &p->ctx);
  return p;
}

template <typename T> InterpBuffer buffer(std::vector<T> &v, DType t) {
  return InterpBuffer{v.data(), t, static_cast<int64_t>(v.size())};
}

std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const tilejit::Error &e) {
    return e.what();
  }
  return "";
}

/// Sum of each row of x[rows][V] with a masked tile loop (tile BLOCK, a scalar
/// f32 accumulator); one program per row.
std::string rowSumKernel(int block, int warps) {
  std::string b = std::to_string(block);
  std::string t = "tensor<" + b + "xi32>";
  std::string tf = "tensor<" + b + "xf32>";
  return R"(
  func.func @row_sum(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %V: i32)
      attributes {tile.kernel, tile.num_warps = )" +
         std::to_string(warps) + R"( : i64} {
    %pid = tile.program_id 0 : i32
    %rowoff = arith.muli %pid, %V : i32
    %row = tile.addptr %x, %rowoff : !tile.ptr<f32>, i32
    %c0 = arith.constant 0 : i32
    %cB = arith.constant )" +
         b + R"( : i32
    %zero = arith.constant 0.0 : f32
    %r = tile.arange : )" +
         t + R"(
    %Vs = tile.splat %V : i32 -> )" +
         t + R"(
    %acc = scf.for %i = %c0 to %V step %cB iter_args(%a = %zero) -> (f32) : i32 {
      %is = tile.splat %i : i32 -> )" +
         t + R"(
      %offs = arith.addi %is, %r : )" +
         t + R"(
      %m = arith.cmpi slt, %offs, %Vs : )" +
         t + R"(
      %v = tile.load %row[%offs] mask %m : !tile.ptr<f32>[)" +
         t + "] mask tensor<" + b + "xi1> -> " + tf + R"(
      %s = tile.reduce sum %v : )" +
         tf + R"( -> f32
      %a2 = arith.addf %a, %s : f32
      scf.yield %a2 : f32
    }
    tile.store %out[%pid], %acc : !tile.ptr<f32>[i32], f32
    return
  })";
}

TEST(Interpreter, MaskedRowSumOverPrograms) {
  auto p = parse(rowSumKernel(256, 2));
  ASSERT_TRUE(p->module);
  const int rows = 7, V = 1000; // V is not a multiple of the tile
  std::vector<float> x(rows * V), out(rows, -1.0f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float &v : x)
    v = dist(rng);
  tilejit::interpret(
      p->module->getOperation(), "row_sum", Grid{rows},
      {buffer(x, DType::F32), buffer(out, DType::F32), int32_t(V)});
  for (int r = 0; r < rows; ++r) {
    double ref = 0;
    for (int j = 0; j < V; ++j)
      ref += x[r * V + j];
    EXPECT_NEAR(out[r], ref, 1e-4) << "row " << r;
  }
}

TEST(Interpreter, TileAndScalarIterArgs) {
  // acc (a tile) and count (a scalar) are carried through the loop.
  auto p = parse(R"(
  func.func @k(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %cnt: !tile.ptr<i32>, %V: i32)
      attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %pid = tile.program_id 0 : i32
    %rowoff = arith.muli %pid, %V : i32
    %row = tile.addptr %x, %rowoff : !tile.ptr<f32>, i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %cB = arith.constant 64 : i32
    %zeros = arith.constant dense<0.0> : tensor<64xf32>
    %r = tile.arange : tensor<64xi32>
    %Vs = tile.splat %V : i32 -> tensor<64xi32>
    %acc:2 = scf.for %i = %c0 to %V step %cB iter_args(%a = %zeros, %n = %c0) -> (tensor<64xf32>, i32) : i32 {
      %is = tile.splat %i : i32 -> tensor<64xi32>
      %offs = arith.addi %is, %r : tensor<64xi32>
      %m = arith.cmpi slt, %offs, %Vs : tensor<64xi32>
      %v = tile.load %row[%offs] mask %m : !tile.ptr<f32>[tensor<64xi32>] mask tensor<64xi1> -> tensor<64xf32>
      %a2 = arith.addf %a, %v : tensor<64xf32>
      %n2 = arith.addi %n, %c1 : i32
      scf.yield %a2, %n2 : tensor<64xf32>, i32
    }
    %s = tile.reduce sum %acc#0 : tensor<64xf32> -> f32
    tile.store %out[%pid], %s : !tile.ptr<f32>[i32], f32
    tile.store %cnt[%pid], %acc#1 : !tile.ptr<i32>[i32], i32
    return
  })");
  ASSERT_TRUE(p->module);
  const int rows = 3, V = 200;
  std::vector<float> x(rows * V), out(rows);
  std::vector<int32_t> cnt(rows);
  for (int j = 0; j < rows * V; ++j)
    x[j] = static_cast<float>(j % 17) * 0.25f; // exact sums
  tilejit::interpret(p->module->getOperation(), "k", Grid{rows},
                     {buffer(x, DType::F32), buffer(out, DType::F32),
                      buffer(cnt, DType::I32), int32_t(V)});
  for (int r = 0; r < rows; ++r) {
    double ref = 0;
    for (int j = 0; j < V; ++j)
      ref += x[r * V + j];
    EXPECT_EQ(out[r], ref) << "row " << r;
    EXPECT_EQ(cnt[r], 4); // ceil(200 / 64)
  }
}

TEST(Interpreter, Bf16SoftmaxStatisticsWithMinusInf) {
  // Loads bf16 with other = -inf, extends to f32, reduces max, then sums
  // exp(x - max): masked lanes give exp(-inf) = 0. Row 2 is fully masked
  // (n = 0): its max is -inf.
  auto p = parse(R"(
  func.func @stats(%x: !tile.ptr<bf16>, %out: !tile.ptr<f32>, %lens: !tile.ptr<i32>, %V: i32)
      attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %pid = tile.program_id 0 : i32
    %n = tile.load %lens[%pid] : !tile.ptr<i32>[i32] -> i32
    %rowoff = arith.muli %pid, %V : i32
    %row = tile.addptr %x, %rowoff : !tile.ptr<bf16>, i32
    %ninf = arith.constant 0xFF80 : bf16
    %r = tile.arange : tensor<128xi32>
    %ns = tile.splat %n : i32 -> tensor<128xi32>
    %m = arith.cmpi slt, %r, %ns : tensor<128xi32>
    %v = tile.load %row[%r] mask %m other %ninf : !tile.ptr<bf16>[tensor<128xi32>] mask tensor<128xi1> other bf16 -> tensor<128xbf16>
    %f = arith.extf %v : tensor<128xbf16> to tensor<128xf32>
    %mx = tile.reduce max %f : tensor<128xf32> -> f32
    %mxs = tile.splat %mx : f32 -> tensor<128xf32>
    %d = arith.subf %f, %mxs : tensor<128xf32>
    %e = math.exp %d : tensor<128xf32>
    %s = tile.reduce sum %e : tensor<128xf32> -> f32
    %c2 = arith.constant 2 : i32
    %o = arith.muli %pid, %c2 : i32
    %c1 = arith.constant 1 : i32
    %o1 = arith.addi %o, %c1 : i32
    tile.store %out[%o], %mx : !tile.ptr<f32>[i32], f32
    tile.store %out[%o1], %s : !tile.ptr<f32>[i32], f32
    return
  })");
  ASSERT_TRUE(p->module);
  const int rows = 3, V = 100;
  std::vector<uint16_t> x(rows * V);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (uint16_t &v : x)
    v = tilejit::floatToBf16(dist(rng));
  std::vector<int32_t> lens = {100, 37, 0};
  std::vector<float> out(2 * rows);
  tilejit::interpret(p->module->getOperation(), "stats", Grid{rows},
                     {buffer(x, DType::BF16), buffer(out, DType::F32),
                      buffer(lens, DType::I32), int32_t(V)});
  for (int r = 0; r < 2; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < lens[r]; ++j)
      mx = std::max(mx, tilejit::bf16ToFloat(x[r * V + j]));
    double sum = 0;
    for (int j = 0; j < lens[r]; ++j)
      sum += std::exp(tilejit::bf16ToFloat(x[r * V + j]) - mx);
    EXPECT_EQ(out[2 * r], mx) << "row " << r;
    EXPECT_NEAR(out[2 * r + 1], sum, 1e-5 * sum) << "row " << r;
  }
  EXPECT_EQ(out[4], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[5])); // exp(-inf - -inf): the kernel's problem
}

TEST(Interpreter, MinusInfArithmetic) {
  auto p = parse(R"(
  func.func @k(%out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %ninf = arith.constant dense<0xFF800000> : tensor<32xf32>
    %mx = tile.reduce max %ninf : tensor<32xf32> -> f32
    %three = arith.constant 3.0 : f32
    %ninfs = arith.constant 0xFF800000 : f32
    %d = arith.subf %ninfs, %three : f32
    %e = math.exp %d : f32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    tile.store %out[%c0], %mx : !tile.ptr<f32>[i32], f32
    tile.store %out[%c1], %e : !tile.ptr<f32>[i32], f32
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<float> out(2, 5.0f);
  tilejit::interpret(p->module->getOperation(), "k", Grid{},
                     {buffer(out, DType::F32)});
  EXPECT_EQ(out[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_FALSE(std::signbit(out[1]));
}

TEST(Interpreter, IfWithResult) {
  auto p = parse(R"(
  func.func @k(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %pid = tile.program_id 0 : i32
    %c2 = arith.constant 2 : i32
    %rem = arith.remsi %pid, %c2 : i32
    %c0 = arith.constant 0 : i32
    %even = arith.cmpi eq, %rem, %c0 : i32
    %v = scf.if %even -> (f32) {
      %one = arith.constant 1.0 : f32
      scf.yield %one : f32
    } else {
      %l = tile.load %x[%pid] : !tile.ptr<f32>[i32] -> f32
      %t = arith.mulf %l, %l : f32
      scf.yield %t : f32
    }
    tile.store %out[%pid], %v : !tile.ptr<f32>[i32], f32
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<float> x = {9, 3, 9, 5, 9}, out(5);
  tilejit::interpret(p->module->getOperation(), "k", Grid{5},
                     {buffer(x, DType::F32), buffer(out, DType::F32)});
  EXPECT_EQ(out, (std::vector<float>{1, 9, 1, 25, 1}));
}

TEST(Interpreter, TruncfStoresRoundToNearestEven) {
  auto p = parse(R"(
  func.func @k(%x: !tile.ptr<f32>, %b: !tile.ptr<bf16>, %h: !tile.ptr<f16>, %s: !tile.ptr<bf16>)
      attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %r = tile.arange : tensor<32xi32>
    %v = tile.load %x[%r] : !tile.ptr<f32>[tensor<32xi32>] -> tensor<32xf32>
    %vb = arith.truncf %v : tensor<32xf32> to tensor<32xbf16>
    %vh = arith.truncf %v : tensor<32xf32> to tensor<32xf16>
    tile.store %b[%r], %vb : !tile.ptr<bf16>[tensor<32xi32>], tensor<32xbf16>
    tile.store %h[%r], %vh : !tile.ptr<f16>[tensor<32xi32>], tensor<32xf16>
    %sum = arith.addf %vb, %vb : tensor<32xbf16>
    %sq = arith.mulf %sum, %vb : tensor<32xbf16>
    tile.store %s[%r], %sq : !tile.ptr<bf16>[tensor<32xi32>], tensor<32xbf16>
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f + std::ldexp(1.0f, -8);                         // tie -> 1.0
  x[1] = 1.0f + 3 * std::ldexp(1.0f, -8);                     // tie -> up
  x[2] = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20); // above tie
  x[3] = -(1.0f + std::ldexp(1.0f, -8));                      // -1.0
  x[4] = 1.0f + std::ldexp(1.0f, -11);                        // f16 tie
  x[5] = 3.0e38f;                                             // bf16 ok
  x[6] = 1.0e5f;                                              // f16 inf
  x[7] = std::numeric_limits<float>::quiet_NaN();
  for (int j = 8; j < 32; ++j)
    x[j] = 1.0f / static_cast<float>(j);
  std::vector<uint16_t> b(32), h(32), s(32);
  tilejit::interpret(p->module->getOperation(), "k", Grid{},
                     {buffer(x, DType::F32), buffer(b, DType::BF16),
                      buffer(h, DType::F16), buffer(s, DType::BF16)});
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0x3F82);
  EXPECT_EQ(b[2], 0x3F81);
  EXPECT_EQ(b[3], 0xBF80);
  EXPECT_EQ(h[4], 0x3C00);
  EXPECT_EQ(h[6], 0x7C00);
  EXPECT_TRUE(std::isnan(tilejit::bf16ToFloat(b[7])));
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(b[j], tilejit::floatToBf16(x[j])) << j;
    EXPECT_EQ(h[j], tilejit::floatToHalf(x[j])) << j;
    // bf16 arithmetic rounds after each op.
    float vb = tilejit::bf16ToFloat(tilejit::floatToBf16(x[j]));
    float sum = tilejit::bf16ToFloat(tilejit::floatToBf16(vb + vb));
    uint16_t ref = tilejit::floatToBf16(sum * vb);
    if (!std::isnan(x[j])) {
      EXPECT_EQ(s[j], ref) << j;
    }
  }
}

TEST(Interpreter, IntegerWrapAndNaNSemantics) {
  auto p = parse(R"(
  func.func @k(%i: !tile.ptr<i32>, %f: !tile.ptr<f32>, %b: !tile.ptr<i1>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %big = arith.constant 1073741824 : i32
    %c4 = arith.constant 4 : i32
    %c3 = arith.constant 3 : i32
    %w = arith.muli %big, %c4 : i32
    %w2 = arith.muli %big, %c3 : i32
    %m7 = arith.constant -7 : i32
    %c2 = arith.constant 2 : i32
    %q = arith.divsi %m7, %c2 : i32
    %rm = arith.remsi %m7, %c2 : i32
    %l = arith.constant 5000000000 : i64
    %t = arith.trunci %l : i64 to i32
    %nan = arith.constant 0x7FC00000 : f32
    %one = arith.constant 1.0 : f32
    %mx = arith.maximumf %nan, %one : f32
    %mn = arith.maxnumf %nan, %one : f32
    %uno = arith.cmpf uno, %nan, %one : f32
    %oeq = arith.cmpf oeq, %nan, %nan : f32
    %une = arith.cmpf une, %nan, %nan : f32
    %fl = arith.constant -2.75 : f32
    %fi = arith.fptosi %fl : f32 to i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c5 = arith.constant 5 : i32
    %odd = arith.constant 16777217 : i32
    %odf = arith.sitofp %odd : i32 to f32
    %m1 = arith.constant -1 : i32
    %uf = arith.uitofp %m1 : i32 to f32
    %c257 = arith.constant 257 : i32
    %bf = arith.sitofp %c257 : i32 to bf16
    %bff = arith.extf %bf : bf16 to f32
    %tru = arith.constant true
    %ext = arith.extui %tru : i1 to i32
    %exs = arith.extsi %tru : i1 to i32
    %sum = arith.addi %ext, %exs : i32
    %c6 = arith.constant 6 : i32
    %fls = arith.constant false
    %slt = arith.cmpi slt, %tru, %fls : i1
    tile.store %b[%c3], %slt : !tile.ptr<i1>[i32], i1
    tile.store %f[%c2], %odf : !tile.ptr<f32>[i32], f32
    tile.store %f[%c3], %uf : !tile.ptr<f32>[i32], f32
    tile.store %f[%c4], %bff : !tile.ptr<f32>[i32], f32
    tile.store %i[%c6], %sum : !tile.ptr<i32>[i32], i32
    tile.store %i[%c0], %w : !tile.ptr<i32>[i32], i32
    tile.store %i[%c1], %w2 : !tile.ptr<i32>[i32], i32
    tile.store %i[%c2], %q : !tile.ptr<i32>[i32], i32
    tile.store %i[%c3], %rm : !tile.ptr<i32>[i32], i32
    tile.store %i[%c4], %t : !tile.ptr<i32>[i32], i32
    tile.store %i[%c5], %fi : !tile.ptr<i32>[i32], i32
    tile.store %f[%c0], %mx : !tile.ptr<f32>[i32], f32
    tile.store %f[%c1], %mn : !tile.ptr<f32>[i32], f32
    tile.store %b[%c0], %uno : !tile.ptr<i1>[i32], i1
    tile.store %b[%c1], %oeq : !tile.ptr<i1>[i32], i1
    tile.store %b[%c2], %une : !tile.ptr<i1>[i32], i1
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<int32_t> i(7, 9);
  std::vector<float> f(5);
  std::vector<uint8_t> b(4, 7);
  tilejit::interpret(
      p->module->getOperation(), "k", Grid{},
      {buffer(i, DType::I32), buffer(f, DType::F32), buffer(b, DType::I1)});
  EXPECT_EQ(i[0], 0);
  EXPECT_EQ(i[1], -1073741824);
  EXPECT_EQ(i[2], -3);
  EXPECT_EQ(i[3], -1);
  EXPECT_EQ(i[4], static_cast<int32_t>(5000000000LL - 4294967296LL));
  EXPECT_EQ(i[5], -2);
  EXPECT_TRUE(std::isnan(f[0]));
  EXPECT_EQ(f[1], 1.0f);
  EXPECT_EQ(f[2], 16777216.0f);
  EXPECT_EQ(f[3], 4294967296.0f);
  EXPECT_EQ(f[4], 256.0f); // 257 ties to the even bf16 256
  EXPECT_EQ(i[6], 0);      // zext(true) + sext(true) = 1 + -1
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 0, 1, 1})); // signed i1: true = -1
}

TEST(Interpreter, ThreeDimensionalGrid) {
  auto p = parse(R"(
  func.func @k(%out: !tile.ptr<i64>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %x = tile.program_id 0 : i32
    %y = tile.program_id 1 : i32
    %z = tile.program_id 2 : i32
    %nx = tile.num_programs 0 : i32
    %ny = tile.num_programs 1 : i32
    %yz = arith.muli %z, %ny : i32
    %yy = arith.addi %yz, %y : i32
    %idx0 = arith.muli %yy, %nx : i32
    %idx = arith.addi %idx0, %x : i32
    %c100 = arith.constant 100 : i32
    %v0 = arith.muli %z, %c100 : i32
    %c10 = arith.constant 10 : i32
    %v1 = arith.muli %y, %c10 : i32
    %v2 = arith.addi %v0, %v1 : i32
    %v3 = arith.addi %v2, %x : i32
    %v = arith.extsi %v3 : i32 to i64
    tile.store %out[%idx], %v : !tile.ptr<i64>[i32], i64
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<int64_t> out(5 * 3 * 2, -1);
  tilejit::interpret(p->module->getOperation(), "k", Grid{5, 3, 2},
                     {buffer(out, DType::I64)});
  for (int z = 0; z < 2; ++z)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 5; ++x)
        EXPECT_EQ(out[(z * 3 + y) * 5 + x], z * 100 + y * 10 + x);
}

TEST(Interpreter, OutOfBoundsUnmaskedLoadThrows) {
  auto p = parse(R"(
  func.func @oob(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %r = tile.arange : tensor<128xi32>
    %v = tile.load %x[%r] : !tile.ptr<f32>[tensor<128xi32>] -> tensor<128xf32>
    %s = tile.reduce sum %v : tensor<128xf32> -> f32
    %c0 = arith.constant 0 : i32
    tile.store %out[%c0], %s : !tile.ptr<f32>[i32], f32
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<float> x(100), out(1);
  std::string msg = errorOf([&] {
    tilejit::interpret(p->module->getOperation(), "oob", Grid{4},
                       {buffer(x, DType::F32), buffer(out, DType::F32)});
  });
  EXPECT_NE(msg.find("offset 100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("argument #0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 f32 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tile.load"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'oob'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loc("), std::string::npos) << msg;
}

TEST(Interpreter, OutOfBoundsStoreThrowsButMaskedLanesDoNot) {
  auto p = parse(R"(
  func.func @k(%out: !tile.ptr<i32>, %n: i32) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %r = tile.arange : tensor<32xi32>
    %ns = tile.splat %n : i32 -> tensor<32xi32>
    %m = arith.cmpi slt, %r, %ns : tensor<32xi32>
    tile.store %out[%r], %r mask %m : !tile.ptr<i32>[tensor<32xi32>], tensor<32xi32> mask tensor<32xi1>
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<int32_t> out(20, -1);
  tilejit::interpret(p->module->getOperation(), "k", Grid{},
                     {buffer(out, DType::I32), int32_t(10)});
  for (int j = 0; j < 20; ++j)
    EXPECT_EQ(out[j], j < 10 ? j : -1);
  std::string msg = errorOf([&] {
    tilejit::interpret(p->module->getOperation(), "k", Grid{},
                       {buffer(out, DType::I32), int32_t(21)});
  });
  EXPECT_NE(msg.find("store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 20"), std::string::npos) << msg;
}

TEST(Interpreter, RejectsBadArguments) {
  auto p = parse(rowSumKernel(256, 2));
  ASSERT_TRUE(p->module);
  std::vector<float> x(1000), out(1);
  std::vector<uint16_t> xb(1000);
  mlir::Operation *m = p->module->getOperation();
  std::string msg = errorOf([&] {
    tilejit::interpret(
        m, "row_sum", Grid{},
        {buffer(xb, DType::BF16), buffer(out, DType::F32), int32_t(1000)});
  });
  EXPECT_NE(msg.find("argument #0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
  msg = errorOf([&] {
    tilejit::interpret(
        m, "row_sum", Grid{},
        {buffer(x, DType::F32), buffer(out, DType::F32), int64_t(1000)});
  });
  EXPECT_NE(msg.find("argument #2"), std::string::npos) << msg;
  msg = errorOf([&] {
    tilejit::interpret(m, "row_sum", Grid{},
                       {buffer(x, DType::F32), buffer(out, DType::F32)});
  });
  EXPECT_NE(msg.find("takes 3 arguments, got 2"), std::string::npos) << msg;
  msg = errorOf([&] {
    tilejit::interpret(m, "nope", Grid{},
                       {buffer(x, DType::F32), buffer(out, DType::F32)});
  });
  EXPECT_NE(msg.find("unknown kernel 'nope'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'row_sum'"), std::string::npos) << msg;
}

TEST(Interpreter, RejectsUnspecializedConstexprAndUnsupportedOps) {
  auto p = parse(R"(
  func.func @ce(%out: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %b = tile.constexpr "BLOCK" : i32
    tile.store %out[%b], %b : !tile.ptr<i32>[i32], i32
    return
  }
  func.func @bc(%out: !tile.ptr<i32>) attributes {tile.kernel, tile.num_warps = 1 : i64} {
    %f = arith.constant 1.0 : f32
    %b = arith.bitcast %f : f32 to i32
    %c0 = arith.constant 0 : i32
    tile.store %out[%c0], %b : !tile.ptr<i32>[i32], i32
    return
  })");
  ASSERT_TRUE(p->module);
  std::vector<int32_t> out(4);
  std::string msg = errorOf([&] {
    tilejit::interpret(p->module->getOperation(), "ce", Grid{},
                       {buffer(out, DType::I32)});
  });
  EXPECT_NE(msg.find("tile.constexpr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BLOCK"), std::string::npos) << msg;
  msg = errorOf([&] {
    tilejit::interpret(p->module->getOperation(), "bc", Grid{},
                       {buffer(out, DType::I32)});
  });
  EXPECT_NE(msg.find("arith.bitcast"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported"), std::string::npos) << msg;
}

TEST(Interpreter, RowSumThroughput) {
  // 64 rows x 32000 (a vocabulary-sized row), tile 4096, 4 warps.
  auto p = parse(rowSumKernel(4096, 4));
  ASSERT_TRUE(p->module);
  const int rows = 64, V = 32000;
  std::vector<float> x(static_cast<size_t>(rows) * V), out(rows);
  for (size_t j = 0; j < x.size(); ++j)
    x[j] = static_cast<float>(j % 1000) * 1e-3f;
  auto run = [&] {
    auto t0 = std::chrono::steady_clock::now();
    tilejit::interpret(
        p->module->getOperation(), "row_sum", Grid{rows},
        {buffer(x, DType::F32), buffer(out, DType::F32), int32_t(V)});
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  run(); // warm up
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep)
    best = std::min(best, run());
  double elems = static_cast<double>(rows) * V;
  std::printf("[interp] row_sum 64x32000 f32: %.2f ms, %.3g elements/s\n",
              best * 1e3, elems / best);
  for (int r = 0; r < rows; ++r) {
    double ref = 0;
    for (int j = 0; j < V; ++j)
      ref += x[static_cast<size_t>(r) * V + j];
    EXPECT_NEAR(out[r], ref, 1e-5 * std::abs(ref)) << "row " << r;
  }
  EXPECT_LT(best, 1.0);
}

} // namespace
