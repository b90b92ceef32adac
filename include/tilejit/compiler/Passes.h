//===- Passes.h - tilejit's passes ------------------------------*- C++ -*-===//
#ifndef TILEJIT_COMPILER_PASSES_H
#define TILEJIT_COMPILER_PASSES_H

#include "tilejit/TensorMap.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tilejit {

#define GEN_PASS_DECL
#include "compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Passes.h.inc"

/// The tensor maps simt-tensor-maps recorded on a kernel (its
/// simt.tensor_maps), in the order a launch passes them.
std::vector<TensorMapParam> tensorMapParams(mlir::Operation *kernel);

} // namespace tilejit

#endif // TILEJIT_COMPILER_PASSES_H
