//===- IrTest.cpp - parsing and verifying tile IR -------------------------===//
#include "tilejit/ir/Dialects.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace {

mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &ctx,
                                        const char *text) {
  mlir::DialectRegistry registry;
  tilejit::registerTilejitDialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
  ctx.getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
  return mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
}

TEST(TileIr, ParsesAMaskedLoad) {
  mlir::MLIRContext ctx;
  auto m = parse(ctx, R"(
    func.func @k(%p: !tile.ptr<bf16>, %n: i32) {
      %r = tile.arange : tensor<128xi32>
      %nn = tile.splat %n : i32 -> tensor<128xi32>
      %m = arith.cmpi slt, %r, %nn : tensor<128xi32>
      %x = tile.load %p[%r] mask %m : !tile.ptr<bf16>[tensor<128xi32>] mask tensor<128xi1> -> tensor<128xbf16>
      return
    })");
  ASSERT_TRUE(m);
  int loads = 0;
  m->walk([&](tilejit::tile::LoadOp op) {
    ++loads;
    EXPECT_TRUE(
        mlir::cast<mlir::ShapedType>(op.getType()).getElementType().isBF16());
  });
  EXPECT_EQ(loads, 1);
}

TEST(TileIr, RejectsLoadWithMismatchedMaskShape) {
  mlir::MLIRContext ctx;
  auto m = parse(ctx, R"(
    func.func @k(%p: !tile.ptr<f32>, %m: tensor<64xi1>) {
      %r = tile.arange : tensor<128xi32>
      %x = tile.load %p[%r] mask %m : !tile.ptr<f32>[tensor<128xi32>] mask tensor<64xi1> -> tensor<128xf32>
      return
    })");
  EXPECT_FALSE(m);
}

TEST(TileIr, RejectsReduceToWrongType) {
  mlir::MLIRContext ctx;
  auto m = parse(ctx, R"(
    func.func @k(%x: tensor<128xf32>) {
      %s = tile.reduce sum %x : tensor<128xf32> -> i32
      return
    })");
  EXPECT_FALSE(m);
}

} // namespace
