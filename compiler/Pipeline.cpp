//===- Pipeline.cpp - the compiler, top to bottom -------------------------===//
//
// Read this function list from top to bottom to learn the compiler: each step
// is one pass (or one external tool), and each is logged with its time and,
// at debug level (TILEJIT_LOG=debug), the IR it produced.
//
//===----------------------------------------------------------------------===//
#include "tilejit/Compiler.h"

#include "codegen/Nvrtc.h"
#include "tilejit/Error.h"
#include "tilejit/Log.h"
#include "tilejit/Timing.h"
#include "tilejit/codegen/CudaEmitter.h"
#include "tilejit/compiler/Passes.h"
#include "tilejit/ir/TileModuleImpl.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;

namespace tilejit {
namespace {

std::string print(ModuleOp m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os);
  return text;
}

/// Runs one pass on the module, logs it, and turns failures into an Error.
void step(TileModule &module, const char *name, std::unique_ptr<Pass> pass) {
  auto &impl = module.impl();
  auto t0 = std::chrono::steady_clock::now();
  PassManager pm(impl.context.get());
  pm.addPass(std::move(pass));
  collectDiagnostics(*impl.context,
                     "kernel '" + impl.kernelName + "': step " + name +
                         " failed",
                     [&] { return pm.run(*impl.module); });
  log()->debug("{} {}: {:.2f} ms\n{}", impl.kernelName, name, msSince(t0),
               print(*impl.module));
}

/// The architecture NVRTC compiles for: sm_90's dot loops run on wgmma,
/// which only the arch-specific target sm_90a has; its binaries run on
/// sm_90 devices alone, as every sm_90 binary does. PTX asked for as
/// compute_90 stays portable (and its dot loops run mma.sync).
std::string nvrtcArch(ModuleOp m, const std::string &arch) {
  bool dotLoops = false;
  m.walk([&](simt::DotLoopOp) { dotLoops = true; });
  if (dotLoops && arch == "sm_90")
    return arch + "a";
  return arch;
}

} // namespace

Stage parseStage(const std::string &name) {
  if (name == "tile")
    return Stage::Tile;
  if (name == "simt")
    return Stage::Simt;
  if (name == "cuda")
    return Stage::Cuda;
  if (name == "ptx")
    return Stage::Ptx;
  if (name == "cubin" || name == "sass")
    return Stage::Cubin;
  throw Error("unknown stage '" + name +
              "' (expected tile, simt, cuda, ptx, cubin or sass)");
}

void optimizeTile(TileModule &module) {
  step(module, "tile-verify", createTileVerify());
  step(module, "tile-specialize", createTileSpecialize());
  step(module, "canonicalize", createCanonicalizerPass());
  step(module, "cse", createCSEPass());
  step(module, "loop-invariant-code-motion",
       createLoopInvariantCodeMotionPass());
  // The row schedules: a no-op for kernels that do not ask for them.
  // tile-fuse-walks leaves a fused walk's loads twice: CSE keeps one.
  step(module, "tile-fuse-walks", createTileFuseWalks());
  step(module, "cse", createCSEPass());
  step(module, "tile-split-rows", createTileSplitRows());
  step(module, "tile-keep-rows", createTileKeepRows());
  step(module, "tile-copy-ahead", createTileCopyAhead());
  step(module, "tile-choose-occupancy", createTileChooseOccupancy());
  step(module, "tile-unswitch", createTileUnswitch());
  step(module, "tile-peel-tail", createTilePeelTail());
  step(module, "tile-load-ahead", createTileLoadAhead());
  step(module, "tile-expand-softmax", createTileExpandSoftmax());
  step(module, "tile-pipeline-dot", createTilePipelineDot());
  step(module, "tile-expand-load-block", createTileExpandLoadBlock());
  step(module, "canonicalize", createCanonicalizerPass());
  step(module, "cse", createCSEPass());
}

void lowerToSimt(TileModule &module) {
  step(module, "tile-assign-layout", createTileAssignLayout());
  step(module, "tile-lower-to-simt", createTileLowerToSimt());
  step(module, "canonicalize", createCanonicalizerPass());
  step(module, "cse", createCSEPass());
  step(module, "loop-invariant-code-motion",
       createLoopInvariantCodeMotionPass());
  step(module, "simt-vectorize-access", createSimtVectorizeAccess());
  step(module, "simt-tensor-maps", createSimtTensorMaps());
  step(module, "simt-resident-programs", createSimtResidentPrograms());
  step(module, "simt-cluster-barriers", createSimtClusterBarriers());
}

CompiledKernel compile(const TileModule &input, const CompileOptions &options) {
  auto t0 = std::chrono::steady_clock::now();
  TileModule module = input.clone();
  CompiledKernel out;
  out.name = module.kernelName();

  optimizeTile(module);
  out.tileIR = module.str();
  if (options.upTo == Stage::Tile)
    return out;

  lowerToSimt(module);
  out.simtIR = module.str();
  module.impl().module->walk([&](func::FuncOp f) {
    if (auto p = f->getAttrOfType<IntegerAttr>(attr::kThreads))
      out.threads = p.getInt();
    if (auto c = f->getAttrOfType<IntegerAttr>(attr::kClusterSize))
      out.clusterSize = c.getInt();
    if (auto r = f->getAttrOfType<IntegerAttr>(attr::kRowsSplit))
      out.splitRows = std::max<int64_t>(1, r.getInt());
    if (auto s = f->getAttrOfType<IntegerAttr>(attr::kSharedBytes))
      out.dynamicSharedBytes = s.getInt();
    out.resident |= f->hasAttr(attr::kResident);
    if (f->hasAttr(attr::kKernel))
      out.tensorMaps = tensorMapParams(f);
  });
  if (options.upTo == Stage::Simt)
    return out;

  out.cuda = emitCuda(*module.impl().module);
  out.mlirMs = msSince(t0);
  log()->debug("{} cuda:\n{}", out.name, out.cuda);
  if (options.upTo == Stage::Cuda)
    return out;

  auto t1 = std::chrono::steady_clock::now();
  nvrtc::CompileResult r =
      nvrtc::compile(out.cuda, out.name + ".cu",
                     nvrtcArch(*module.impl().module, options.arch),
                     options.nvrtcOptions);
  out.ptx = std::move(r.ptx);
  out.cubin = std::move(r.cubin);
  out.nvrtcMs = msSince(t1);
  log()->info("compiled {} for {}: MLIR {:.1f} ms, NVRTC {:.1f} ms", out.name,
              options.arch, out.mlirMs, out.nvrtcMs);
  return out;
}

} // namespace tilejit
