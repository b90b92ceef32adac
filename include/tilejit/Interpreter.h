//===- Interpreter.h - CPU interpreter for tile-level kernels ---*- C++ -*-===//
//
// Runs a kernel of a tile-level module (after tile-specialize and
// canonicalize) on the CPU, one program instance at a time, the way Triton's
// TRITON_INTERPRET=1 does. Used by the tests and by `tilejit run --device=cpu`.
//
// Numerics follow the IR types exactly: every f32 op is computed in float,
// bf16/f16 results are rounded to nearest even to their format after every
// op, integers wrap as two's complement of their width and i1 is a bool.
// Masked-off load lanes take `other` (or zero) and never touch memory;
// masked-off store lanes write nothing.
//
// This header is MLIR-free; the implementation lives in tilejit_interp.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_INTERPRETER_H
#define TILEJIT_INTERPRETER_H

#include "tilejit/DType.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace mlir {
class Operation;
} // namespace mlir

namespace tilejit {

/// A kernel argument for the CPU interpreter: a buffer (for !tile.ptr<T> args)
/// or a scalar. The buffer is not owned; `dtype` must equal the pointer's
/// element type and `numElements` bounds every access through it.
struct InterpBuffer {
  void *data;
  DType dtype;
  int64_t numElements;
};

/// One kernel argument: a buffer for !tile.ptr<T>, int32_t for i32, int64_t
/// for i64, float for f32 (the kinds must match exactly).
using InterpArg = std::variant<InterpBuffer, int32_t, int64_t, float>;

/// The launch grid (number of program instances along each axis).
struct Grid {
  int64_t x = 1, y = 1, z = 1;
};

/// Runs kernel `kernelName` of the tile-level module `module` (a ModuleOp*,
/// after tile-specialize and canonicalize) for every program id of the grid,
/// on the CPU. Programs run in parallel on a few threads when the grid is
/// large (set TILEJIT_INTERP_THREADS=1 to run them one by one).
///
/// Throws tilejit::Error (naming the kernel, the op and its location) on: an
/// unknown kernel, a wrong argument count/kind/dtype, an out-of-bounds
/// unmasked load or store (with the offset, the argument index and the buffer
/// size), an op the interpreter does not support (tile.constexpr included:
/// specialize first).
void interpret(mlir::Operation *module, const std::string &kernelName,
               Grid grid, const std::vector<InterpArg> &args);

} // namespace tilejit

#endif // TILEJIT_INTERPRETER_H
