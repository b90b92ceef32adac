//===- CudaEmitter.cpp - SIMT-level MLIR to CUDA C++ ----------------------===//
//
// One KernelEmitter (KernelEmitter.h) per kernel walks the (structured,
// single-block) body in order and prints one C statement per op: here the
// kernel's signature, its blocks and control flow; EmitArith.cpp and
// EmitSimt.cpp print the other op families. See CudaEmitter.h for the
// conventions of the emitted code.
//
//===----------------------------------------------------------------------===//
#include "tilejit/codegen/CudaEmitter.h"

#include "codegen/KernelEmitter.h"

using namespace mlir;

namespace tilejit {

namespace {

// The CUDA C++ of codegen/cuda/: the prelude every kernel gets, and the
// pieces printed only into kernels that use them.
const char *const kPrelude =
#include "Prelude.cuh.inc"
    ;
const char *const kCluster =
#include "Cluster.cuh.inc"
    ;
const char *const kMatrix =
#include "Matrix.cuh.inc"
    ;

// tile.dot_loop's CUDA C++ (codegen/cuda/), printed where a kernel has one.
const char *const kDotLoop[] = {
#include "DotLoopMma.cuh.inc"
    ,
#include "DotLoopWgmma.cuh.inc"
    ,
#include "DotLoopWgmmaWs.cuh.inc"
    ,
#include "DotLoopWgmmaTma.cuh.inc"
    ,
#include "DotLoopResident.cuh.inc"
    ,
#include "DotLoop.cuh.inc"
};

} // namespace

namespace emit {


void KernelEmitter::emit() {
  kernelName = func.getSymName().str();
  if (!isIdentifier(kernelName))
    fail(nullptr, "the kernel name is not a C identifier");
  auto threadsAttr = func->getAttrOfType<IntegerAttr>(attr::kThreads);
  if (!threadsAttr)
    fail(nullptr, std::string("missing '") + attr::kThreads +
                      "' (run tile-assign-layout and tile-lower-to-simt)");
  threads = threadsAttr.getInt();
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    fail(nullptr, "simt.threads = " + std::to_string(threads) +
                      " is not a multiple of 32 in [32, 1024]");
  if (func.getFunctionType().getNumResults() != 0)
    fail(nullptr, "a kernel must not return values");
  if (func.isExternal() || !func.getBody().hasOneBlock())
    fail(nullptr, "the kernel body must be a single block");

  if (auto c = func->getAttrOfType<IntegerAttr>(attr::kClusterSize))
    clusterSize = c.getInt();
  alignedVectors = func->hasAttr(attr::kAlignedVectors);
  std::string p = std::to_string(threads);
  line("// tilejit: " + kernelName + ", " + p + " threads");
  std::string attrs = "__launch_bounds__(" + p;
  if (auto m = func->getAttrOfType<IntegerAttr>(attr::kMinProgramsPerSm);
      m && m.getInt() > 0)
    attrs += ", " + std::to_string(m.getInt());
  attrs += ")";
  if (clusterSize > 1) {
    line("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900");
    line("#error \"" + kernelName +
         " uses thread-block clusters: compile for sm_90 or newer\"");
    line("#endif");
    attrs += " __cluster_dims__(" + std::to_string(clusterSize) + ", 1, 1)";
  }
  line("extern \"C\" __global__ void " + attrs);
  Block &body = func.getBody().front();
  std::vector<std::string> params;
  for (BlockArgument arg : body.getArguments()) {
    Type t = arg.getType();
    std::string n = bind(arg);
    if (isa<VectorType>(t))
      fail(nullptr,
           "argument " + std::to_string(arg.getArgNumber()) + " is a vector");
    std::string ct = scalarType(t, func);
    bool mayAlias =
        func.getArgAttr(arg.getArgNumber(), attr::kMayAlias) != nullptr;
    if (isa<tile::PtrType>(t) && !mayAlias)
      params.push_back(ct + "__restrict__ " + n);
    else
      params.push_back(ct + " " + n);
  }
  // The tensor maps each launch encodes, then the mask of those it could.
  if (auto maps = func->getAttrOfType<ArrayAttr>(attr::kTensorMaps)) {
    for (size_t i = 0; i < maps.size(); ++i)
      params.push_back("const __grid_constant__ tj_tensor_map tj_map" +
                       std::to_string(i));
    params.push_back("const unsigned tj_maps_ok");
  }
  resident = func->hasAttr(attr::kResident);
  if (resident)
    for (const char *axis : {"x", "y", "z"})
      params.push_back(std::string("const int tj_grid_") + axis);
  std::string head = kernelName + "(";
  if (params.empty()) {
    line(head + ") {");
  } else if (params.size() <= 3) {
    line(head + llvm::join(params, ", ") + ") {");
  } else {
    std::string pad(head.size(), ' ');
    for (size_t i = 0; i < params.size(); ++i)
      line((i == 0 ? head : pad) + params[i] +
           (i + 1 == params.size() ? ") {" : ","));
  }
  ++indent;
  if (auto bytes = func->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
      bytes && bytes.getInt() > 0)
    line("extern __shared__ __align__(16) unsigned char tj_smem[]; // " +
         std::to_string(bytes.getInt()) + " bytes, set at launch");
  // The cluster combines' mbarriers (simt-cluster-barriers), and a run
  // count for each combine in a loop.
  auto mbarriers = func->getAttrOfType<IntegerAttr>(attr::kClusterMbarriers);
  bool combines = clusterSize > 1 && mbarriers && mbarriers.getInt() > 0;
  if (combines) {
    func.walk([&](tile::ClusterReduceOp op) {
      if (clusterBuffers(op) == 2)
        line("unsigned tj_cluster_runs" +
             std::to_string(clusterMbarrier(op)) + " = 0;");
    });
    std::string k = std::to_string(mbarriers.getInt());
    line("__shared__ __align__(8) unsigned long long tj_cluster_bar[" + k +
         "];");
    line("tj_cluster_mbarriers_init<" + k + ">(tj_cluster_bar);");
    line("bool tj_cluster_init_waited = false;");
  }
  if (resident) {
    // The programs of the grid in turn; the dot loop's ring carries over.
    line("tj_ring_state tj_ring;");
    line("const long long tj_programs = (long long)tj_grid_x * tj_grid_y * "
         "tj_grid_z;");
    line("for (long long tj_prog = blockIdx.x; tj_prog < tj_programs; "
         "tj_prog += gridDim.x) {");
    ++indent;
    declareProgramIds("tj_prog");
  }
  emitBlock(body, {}, {});
  if (resident) {
    --indent;
    line("}");
  }
  if (combines)
    line("tj_cluster_init_wait(tj_cluster_init_waited);");
  --indent;
  line("}");
}

void KernelEmitter::emitBlock(Block &block, ArrayRef<std::string> yieldTargets,
                              ArrayRef<Value> yieldTargetValues) {
  for (Operation &op : block) {
    if (isa<scf::YieldOp>(op)) {
      yieldTo(&op, yieldTargets, yieldTargetValues);
      continue;
    }
    if (isa<func::ReturnOp>(op)) {
      if (op.getNumOperands() != 0)
        fail(&op, "a kernel must not return values");
      if (op.getParentOp() != func.getOperation())
        fail(&op, "return inside a region");
      continue; // the end of the kernel body
    }
    emitOp(&op);
  }
}

void KernelEmitter::emitOp(Operation *op) {
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp);
  if (op->getNumRegions() != 0)
    fail(op, "ops with regions other than scf.for/scf.if are not supported");
  if (auto cr = dyn_cast<tile::ClusterReduceOp>(op))
    return emitClusterReduce(cr);
  if (op->getNumResults() > 1)
    fail(op, "ops with several results are not supported");
  locate(op);
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return emitConstant(c);
  if (emitArith(op) || emitMath(op) || emitVector(op) || emitSimt(op))
    return;
  fail(op, "unsupported op");
}


void KernelEmitter::emitFor(scf::ForOp op) {
  Value iv = op.getInductionVar();
  std::string ivType = scalarType(iv.getType(), op);
  // Loop-carried values live in variables declared before the loop; the
  // loop's results are those same variables after it.
  std::vector<std::string> carried;
  std::vector<Value> carriedValues;
  for (auto [arg, init, result] : llvm::zip_equal(
           op.getRegionIterArgs(), op.getInitArgs(), op.getResults())) {
    declareCopy(op, arg, name(init, op));
    std::string n = names[arg];
    bindAs(result, n);
    carried.push_back(n);
    carriedValues.push_back(arg);
  }
  locate(op); // after the carried values: #line goes before the `for`
  std::string i = bind(iv);
  std::string lb = name(op.getLowerBound(), op);
  std::string ub = name(op.getUpperBound(), op);
  std::string step = name(op.getStep(), op);
  std::string cond = i + " < " + ub;
  if (op.getUnsignedCmp()) {
    std::string ut = "(" + unsignedType(iv.getType(), op) + ")";
    cond = ut + i + " < " + ut + ub;
  }
  stmt("for (" + ivType + " " + i + " = " + lb + "; " + cond + "; " + i +
       " += " + step + ") {");
  ++indent;
  emitBlock(*op.getBody(), carried, carriedValues);
  --indent;
  line("}");
}

void KernelEmitter::emitIf(scf::IfOp op) {
  std::vector<std::string> results;
  std::vector<Value> resultValues;
  for (Value res : op.getResults()) {
    std::string n = bind(res);
    line(declaration(res.getType(), n, op) + ";");
    results.push_back(n);
    resultValues.push_back(res);
  }
  stmt("if (" + name(op.getCondition(), op) + ") {");
  ++indent;
  emitBlock(op.getThenRegion().front(), results, resultValues);
  --indent;
  if (!op.getElseRegion().empty()) {
    line("} else {");
    ++indent;
    emitBlock(op.getElseRegion().front(), results, resultValues);
    --indent;
  }
  line("}");
}

} // namespace emit

using emit::KernelEmitter;

const char *cudaPrelude() { return kPrelude; }

std::string emitCuda(ModuleOp module) {
  std::string out = "// Generated by tilejit from SIMT-level MLIR.\n";
  out += kPrelude;
  bool clusters = false, matrices = false, dotLoops = false;
  module.walk([&](Operation *op) {
    clusters |= isa<tile::ClusterReduceOp>(op);
    matrices |= isa<simt::DotOp, simt::ReduceRowsOp, simt::BroadcastRowsOp,
                    simt::DotLoopOp>(op);
    dotLoops |= isa<simt::DotLoopOp>(op);
  });
  if (clusters)
    out += kCluster;
  if (matrices)
    out += kMatrix;
  if (dotLoops)
    for (const char *text : kDotLoop)
      out += text;
  bool any = false;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr(attr::kKernel))
      continue;
    out += "\n";
    KernelEmitter(out, func).emit();
    any = true;
  }
  if (!any)
    throw Error("emitCuda: the module has no kernel (func.func with " +
                std::string(attr::kKernel) + ")");
  return out;
}

} // namespace tilejit
