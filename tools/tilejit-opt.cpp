//===- tilejit-opt.cpp - mlir-opt for the tile and simt dialects ----------===//
//
// Parses .mlir, runs the requested passes (upstream and tilejit's), prints the
// result. Used by the lit tests in tests/lit.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  tilejit::registerTilejitPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerLoopInvariantCodeMotionPass();
  mlir::DialectRegistry registry;
  tilejit::registerTilejitDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tilejit optimizer driver\n", registry));
}
