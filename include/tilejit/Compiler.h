//===- Compiler.h - from a built kernel to PTX and CUBIN --------*- C++ -*-===//
//
// The whole pipeline in one call (the steps, in order, are in
// compiler/Pipeline.cpp). Set TILEJIT_LOG=debug to see the IR after each step.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_COMPILER_H
#define TILEJIT_COMPILER_H

#include "tilejit/TensorMap.h"
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
  /// Extra NVRTC options (e.g. "-lineinfo"), after tilejit's own.
  std::vector<std::string> nvrtcOptions;
};

/// Everything the pipeline produced for one kernel. Stages past `upTo` are
/// empty. Times are wall-clock milliseconds.
struct CompiledKernel {
  std::string name;
  int64_t threads = 0; ///< threads per program (block size)
  /// Programs per thread-block cluster (grids must be a multiple along x).
  int64_t clusterSize = 1;
  /// Programs each program along x of the caller's grid becomes (a row
  /// split over a cluster, tile.split_rows): launches multiply grid.x by it.
  int64_t splitRows = 1;
  /// Dynamic shared memory per program (its sharedArray()s), in bytes: the
  /// launch must pass it (cuda::launch then raises the 48 KiB default).
  int64_t dynamicSharedBytes = 0;
  /// Its programs run in turn in each launched block (simt-resident-
  /// programs): a launch starts at most one block per SM along x and
  /// passes the grid (three i32) after the tensor maps' mask.
  bool resident = false;
  /// Tensor maps each launch encodes from its arguments and passes after
  /// them, followed by a 32-bit mask of those it could encode
  /// (tilejit/TensorMap.h); empty: none, and no mask.
  std::vector<TensorMapParam> tensorMaps;
  std::string tileIR; ///< after verify/specialize/canonicalize
  std::string simtIR; ///< after layout + lowering
  std::string cuda;   ///< CUDA C++ given to NVRTC
  std::string ptx;
  std::vector<char> cubin;
  double mlirMs = 0, nvrtcMs = 0;
  /// The kernel cache's key (runtime/Cache.h); set by compileCached()
  /// (tilejit/CachedCompile.h) only.
  std::string cacheKey;
  /// BLAKE3 over the key's fields other than the tile IR (kernel name,
  /// num_warps, constexprs, signature, arch, versions): the request the
  /// binary was built for. A lookup through an alias checks it, so an alias
  /// that names another kernel's entry is never served. Set by
  /// compileCached() only.
  std::string requestDigest;
};

/// Runs the tile-level steps in place (verify, specialize, canonicalize, CSE,
/// loop-invariant code motion, the row schedules): the form the CPU
/// interpreter executes by default.
/// Throws tilejit::Error naming the kernel, the step and the diagnostics.
void optimizeTile(TileModule &module);

/// Runs the thread-level steps in place on an optimizeTile()d module (the
/// layout, the lowering to per-thread code and the SIMT passes): the
/// `--emit=simt` form, which codegen prints and the CPU interpreter can
/// run thread by thread. Throws as optimizeTile().
void lowerToSimt(TileModule &module);

/// Runs the pipeline on a copy of `module` up to `options.upTo`.
CompiledKernel compile(const TileModule &module, const CompileOptions &options);

/// SHA-256 of the sources below the tile IR (ir/, compiler/, codegen/), made
/// at build time (cmake/CompilerSourceHash.cmake): part of every cache and
/// tuning key. A kernel spec's own code reaches the key through its tile IR.
const char *compilerSourceHash();

} // namespace tilejit

#endif // TILEJIT_COMPILER_H
