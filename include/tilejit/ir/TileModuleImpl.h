//===- TileModuleImpl.h - what a TileModule holds (MLIR side) ---*- C++ -*-===//
#ifndef TILEJIT_IR_TILEMODULEIMPL_H
#define TILEJIT_IR_TILEMODULEIMPL_H

#include "tilejit/TileModule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace tilejit {

struct TileModule::Impl {
  std::shared_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string kernelName;
};

/// A context with every dialect tilejit uses loaded, multithreading off (each
/// kernel build owns its context; compiles run in parallel across contexts).
std::shared_ptr<mlir::MLIRContext> makeTilejitContext();

/// Runs `fn` while collecting MLIR diagnostics; when `fn` fails, throws a
/// tilejit::Error with `what` followed by the diagnostics.
void collectDiagnostics(mlir::MLIRContext &ctx, const std::string &what,
                        const std::function<mlir::LogicalResult()> &fn);

} // namespace tilejit

#endif // TILEJIT_IR_TILEMODULEIMPL_H
