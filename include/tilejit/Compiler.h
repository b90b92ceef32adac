//===- Compiler.h - from a built kernel to PTX and CUBIN --------*- C++ -*-===//
//
// The whole pipeline in one call (the steps, in order, are in
// compiler/Pipeline.cpp). Set TILEJIT_LOG=debug to see the IR after each step.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_COMPILER_H
#define TILEJIT_COMPILER_H

#include "tilejit/TileModule.h"

#include <string>
#include <vector>

namespace tilejit {

/// How far to run the pipeline (tilejit compile --emit=...).
enum class Stage { Tile, Simt, Cuda, Ptx, Cubin };
/// Parses "tile", "simt", "cuda", "ptx", "cubin"/"sass"; throws tilejit::Error.
Stage parseStage(const std::string &name);

struct CompileOptions {
  std::string arch = "sm_90"; ///< target of the CUBIN (PTX is compute_XX)
  Stage upTo = Stage::Cubin;
};

/// Everything the pipeline produced for one kernel. Stages past `upTo` are
/// empty. Times are wall-clock milliseconds.
struct CompiledKernel {
  std::string name;
  int64_t threads = 0;       ///< threads per program (block size)
  std::string tileIR;        ///< after verify/specialize/canonicalize
  std::string simtIR;        ///< after layout + lowering
  std::string cuda;          ///< CUDA C++ given to NVRTC
  std::string ptx;
  std::vector<char> cubin;
  double mlirMs = 0, nvrtcMs = 0;
};

/// Runs the tile-level steps in place (verify, specialize, canonicalize, CSE,
/// loop-invariant code motion): the form the CPU interpreter executes.
/// Throws tilejit::Error naming the kernel, the step and the diagnostics.
void optimizeTile(TileModule &module);

/// Runs the pipeline on a copy of `module` up to `options.upTo`.
CompiledKernel compile(const TileModule &module, const CompileOptions &options);

} // namespace tilejit

#endif // TILEJIT_COMPILER_H
