//===- SimtTensorMaps.cpp - the copy engine's tensor maps for dot loops ---===//
//
// On sm_90a a dot loop's blocks can be copied by the tensor memory
// accelerator (TMA): one thread issues a bulk copy per 64-element panel of a
// block, the copy engine swizzles it into wgmma's layout and fills what
// lies outside the view with zeros, and every warpgroup multiplies instead
// of copying. The copy reads the view through a tensor map that only the
// host can encode, so this pass records, per view, which kernel parameters
// hold its address, extents and stride; each launch encodes the maps from
// its arguments (tilejit/TensorMap.h). The dot loops taken are those the
// GPU code runs on wgmma with at most 128 accumulators per thread, whose
// views have a contiguous dimension of stride 1 (a constant), whose other
// values are kernel parameters, possibly widened, or constants, and whose
// arrays the kernel does not store to (the copy engine would not see those
// stores).
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "tilejit/Error.h"

namespace tilejit {
#define GEN_PASS_DEF_SIMTTENSORMAPS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

constexpr int64_t kMaxMaps = 32; // bits of the launch's mask

/// The index of the kernel parameter `v` is, if it is one.
std::optional<int> kernelParam(Value v, func::FuncOp kernel) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &kernel.getBody().front())
    return std::nullopt;
  return int(arg.getArgNumber());
}

/// The kernel parameter or constant `v` is, through integer widening.
std::optional<LaunchValue> launchValue(Value v, func::FuncOp kernel) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::ExtSIOp, arith::IndexCastOp>(def))
      break;
    v = def->getOperand(0);
  }
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return LaunchValue{-1, c.getSExtValue()};
  if (std::optional<int> param = kernelParam(v, kernel))
    return LaunchValue{*param, 0};
  return std::nullopt;
}

/// The map of a view read in blocks of `rows` x `cols`: along its columns
/// when their stride is the constant 1, else along its rows when theirs is
/// (the GPU code's choice of which way to keep a block, tj_dot_loop).
std::optional<TensorMapParam> viewMap(func::FuncOp kernel, Value ptr,
                                      Value viewRows, Value viewCols,
                                      Value rowStride, Value colStride,
                                      int64_t rows, int64_t cols) {
  std::optional<int> pointer = kernelParam(ptr, kernel);
  if (!pointer)
    return std::nullopt;
  bool rowsContiguous =
      matchPattern(rowStride, m_One()) && !matchPattern(colStride, m_One());
  if (!rowsContiguous && !matchPattern(colStride, m_One()))
    return std::nullopt;
  auto inner = launchValue(rowsContiguous ? viewRows : viewCols, kernel);
  auto outer = launchValue(rowsContiguous ? viewCols : viewRows, kernel);
  auto stride = launchValue(rowsContiguous ? colStride : rowStride, kernel);
  if (!inner || !outer || !stride)
    return std::nullopt;
  TensorMapParam p;
  p.pointer = *pointer;
  p.elementBytes = 2;
  p.inner = *inner;
  p.outer = *outer;
  p.outerStride = *stride;
  int64_t line = rowsContiguous ? rows : cols; // elements along the inner dim
  p.boxInner = int(std::min<int64_t>(line, 64));
  p.boxOuter = int(rowsContiguous ? cols : rows);
  p.swizzleBytes = p.boxInner * p.elementBytes;
  if (p.boxOuter > 256 || p.swizzleBytes < 32)
    return std::nullopt;
  return p;
}

/// The loops the GPU code runs on wgmma from TMA copies (tj_dot_loop).
bool runsOnWgmma(simt::DotLoopOp op, int64_t threads) {
  int64_t m = op.getM(), n = op.getN(), k = op.getK();
  return threads % 128 == 0 && m % (64 * (threads / 128)) == 0 &&
         (n == 64 || n == 128 || n == 256) &&
         (k == 16 || k == 32 || k == 64) && m * n / threads <= 128 && m <= 256;
}

struct SimtTensorMapsPass
    : public impl::SimtTensorMapsBase<SimtTensorMapsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto threads = kernel->getAttrOfType<IntegerAttr>(attr::kThreads);
      if (!kernel->hasAttr(attr::kKernel) || !threads)
        return;
      // The copy engine reads through the async proxy, which does not see
      // this kernel's own earlier stores: views of arrays it writes keep
      // cp.async.
      llvm::SmallDenseSet<Value, 4> written;
      kernel.walk(
          [&](simt::StoreOp st) { written.insert(pointerRoot(st.getPtr())); });
      Builder b(kernel);
      SmallVector<Attribute> maps;
      kernel.walk([&](simt::DotLoopOp op) {
        if (!runsOnWgmma(op, threads.getInt()) || maps.size() + 2 > kMaxMaps ||
            written.contains(op.getA()) || written.contains(op.getB()))
          return;
        int64_t m = op.getM(), n = op.getN(), k = op.getK();
        auto a = viewMap(kernel, op.getA(), op.getARows(), op.getACols(),
                         op.getARowStride(), op.getAColStride(), m, k);
        auto bm = viewMap(kernel, op.getB(), op.getBRows(), op.getBCols(),
                          op.getBRowStride(), op.getBColStride(), k, n);
        if (!a || !bm)
          return;
        op.setTensorMapsAttr(b.getI64IntegerAttr(int64_t(maps.size())));
        maps.push_back(b.getDenseI64ArrayAttr(flattenTensorMap(*a)));
        maps.push_back(b.getDenseI64ArrayAttr(flattenTensorMap(*bm)));
      });
      if (!maps.empty())
        kernel->setAttr(attr::kTensorMaps, b.getArrayAttr(maps));
    });
  }
};

} // namespace

std::vector<TensorMapParam> tensorMapParams(Operation *kernel) {
  std::vector<TensorMapParam> out;
  if (auto maps = kernel->getAttrOfType<ArrayAttr>(attr::kTensorMaps))
    for (Attribute a : maps) {
      auto fields = cast<DenseI64ArrayAttr>(a).asArrayRef();
      if (!unflattenTensorMap({fields.begin(), fields.end()},
                              out.emplace_back()))
        throw Error(std::string(attr::kTensorMaps) +
                    ": an entry is not 11 fields of a map a launch can "
                    "encode");
    }
  return out;
}

} // namespace tilejit
