//===- CudaEmitter.h - SIMT-level MLIR to CUDA C++ ---------------*- C++
//-*-===//
//
// Prints the kernels of a SIMT-level module (after tile-lower-to-simt,
// canonicalize and cse) as one CUDA C++ translation unit that NVRTC compiles
// without any header: the prelude (codegen/cuda/Prelude.cuh) defines the
// bf16/f16 storage types and their conversions to and from float under
// cuda_bf16.h's names; the other codegen/cuda/*.cuh follow it only in
// kernels that use them (clusters, dot and row ops, dot loops).
//
// Conventions of the emitted code:
//  - every kernel (func.func with `tile.kernel`) becomes
//      extern "C" __global__ void __launch_bounds__(P) name(args)
//    with P = the kernel's `simt.threads`; it must be launched with
//    blockDim = (P, 1, 1).
//  - every SSA value is a C variable `vN`; a vector<K x T> value is an array
//    `T vN[K]` filled by a `#pragma unroll` loop over `e`.
//  - bf16/f16 arithmetic is done in float (each op rounds back to bf16/f16).
//  - arith.maximumf/minimumf propagate NaN and order -0 < +0 like MLIR;
//    maxnumf/minnumf are fmaxf/fminf. Integer add/sub/mul use the plain C
//    signed operators, i.e. signed overflow is assumed not to happen (the
//    DSL's index arithmetic stays in range).
//  - a scalar simt.store is done by thread 0 only.
//  - an op whose location holds a FileLineColLoc (in a named file) gets a
//    `#line N "file"` directive right before its main statement (for a vector
//    op: the body of its element loop) whenever the line the compiler would
//    assume there differs from N, so NVRTC diagnostics point at the kernel
//    spec source; the file name is repeated only when it changes (`#line N`).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_CODEGEN_CUDAEMITTER_H
#define TILEJIT_CODEGEN_CUDAEMITTER_H

#include <string>

namespace mlir {
class ModuleOp;
}

namespace tilejit {

/// Emits every kernel (func.func with tile.kernel) of a SIMT-level module as
/// one CUDA C++ translation unit.
/// Throws tilejit::Error naming the kernel and op for anything it cannot print.
std::string emitCuda(mlir::ModuleOp module);

/// The device helper functions (block-wide reductions, NaN-propagating
/// min/max) that emitCuda puts at the top of every output
/// (codegen/cuda/Prelude.cuh).
const char *cudaPrelude();

} // namespace tilejit

#endif // TILEJIT_CODEGEN_CUDAEMITTER_H
