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

/// Which form of a kernel the interpreter runs: the tile-level module
/// (optimizeTile(), one program at a time) or the thread-level one
/// (lowerToSimt(): each program's threads in lockstep, the code the GPU
/// runs before CUDA is printed), which checks the layout, the lowering
/// and the SIMT passes without a GPU.
enum class InterpretLevel { Tile, Simt };

/// The level CPU runs use when the caller names none (Kernel::runOnCpu,
/// and so every op, the C ABI and the Python package on the CPU): Tile,
/// or Simt when the environment sets TILEJIT_INTERPRET=simt at the first
/// call. setDefaultInterpretLevel() changes it for the whole process.
/// Throws tilejit::Error for another value of TILEJIT_INTERPRET.
InterpretLevel defaultInterpretLevel();
void setDefaultInterpretLevel(InterpretLevel level);

/// The launch grid (number of program instances along each axis).
struct Grid {
  int64_t x = 1, y = 1, z = 1;
};

/// Runs kernel `kernelName` of the tile-level module `module` (a ModuleOp*,
/// after tile-specialize and canonicalize) or of a thread-level one (after
/// lowerToSimt(): the kernel has `simt.threads` and no tile-typed value)
/// for every program id of the grid, on the CPU. Programs run in parallel on a few threads when the grid is
/// large (set TILEJIT_INTERP_THREADS=1 to run them one by one).
///
/// Throws tilejit::Error (naming the kernel, the op and its location) on: an
/// unknown kernel, a wrong argument count/kind/dtype, an out-of-bounds
/// unmasked load or store (with the offset, the argument index and the buffer
/// size), an op the interpreter does not support (tile.constexpr included:
/// specialize first), and in a thread-level kernel a loop bound, branch
/// condition, pointer offset or cluster operand that differs between the
/// threads of a program.
void interpret(mlir::Operation *module, const std::string &kernelName,
               Grid grid, const std::vector<InterpArg> &args);

} // namespace tilejit

#endif // TILEJIT_INTERPRETER_H
