//===- Passes.h - tilejit's passes ------------------------------*- C++ -*-===//
#ifndef TILEJIT_COMPILER_PASSES_H
#define TILEJIT_COMPILER_PASSES_H

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

} // namespace tilejit

#endif // TILEJIT_COMPILER_PASSES_H
