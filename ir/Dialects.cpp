//===- Dialects.cpp - tile and simt dialect definitions and verifiers -----===//
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tilejit;

#include "ir/TileEnums.cpp.inc"

#include "ir/TileDialect.cpp.inc"
#define GET_TYPEDEF_CLASSES
#include "ir/TileTypes.cpp.inc"
#define GET_OP_CLASSES
#include "ir/TileOps.cpp.inc"

#include "ir/SimtDialect.cpp.inc"
#define GET_OP_CLASSES
#include "ir/SimtOps.cpp.inc"

void tile::TileDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/TileTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/TileOps.cpp.inc"
      >();
}

void simt::SimtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/SimtOps.cpp.inc"
      >();
}

void tilejit::registerTilejitDialects(DialectRegistry &registry) {
  registry.insert<tile::TileDialect, simt::SimtDialect, func::FuncDialect,
                  arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                  vector::VectorDialect>();
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

int64_t tilejit::layoutGroup(Operation *kernel, int64_t tileElements) {
  auto threads = kernel->getAttrOfType<IntegerAttr>(attr::kThreads);
  int64_t k = threads ? tileElements / threads.getInt() : tileElements;
  if (auto groups = kernel->getAttrOfType<DenseI64ArrayAttr>(attr::kGroups))
    for (size_t i = 0; i + 1 < groups.size(); i += 2)
      if (groups[i] == tileElements)
        return groups[i + 1];
  auto vec = kernel->getAttrOfType<IntegerAttr>(attr::kVec);
  return vec ? defaultLayoutGroup(vec.getInt(), k) : std::max<int64_t>(k, 1);
}

std::optional<DType> tilejit::dtypeOfScalar(Type t) {
  if (t.isInteger(1))
    return DType::I1;
  if (t.isInteger(32))
    return DType::I32;
  if (t.isInteger(64))
    return DType::I64;
  if (t.isBF16())
    return DType::BF16;
  if (t.isF16())
    return DType::F16;
  if (t.isF32())
    return DType::F32;
  return std::nullopt;
}

static Type elementOf(Type t) {
  if (auto shaped = dyn_cast<ShapedType>(t))
    return shaped.getElementType();
  return t;
}

/// Shape of a scalar-or-tile type: {} for scalars, {N} for tiles.
static ArrayRef<int64_t> shapeOf(Type t) {
  if (auto shaped = dyn_cast<ShapedType>(t))
    return shaped.getShape();
  return {};
}

LogicalResult tile::ArangeOp::verify() {
  if (getType().getNumElements() < 1)
    return emitOpError("needs at least one element");
  return success();
}

LogicalResult tile::SplatOp::verify() {
  if (getSrc().getType() != getType().getElementType())
    return emitOpError("scalar type ")
           << getSrc().getType() << " differs from the tile's element type "
           << getType().getElementType();
  return success();
}

/// Checks shared by load and store: value/mask/offsets agree in shape and
/// the value's element type is the pointer's.
static LogicalResult verifyAccess(Operation *op, tile::PtrType ptr,
                                  Type offsets, Type value, Value mask) {
  if (shapeOf(offsets) != shapeOf(value))
    return op->emitOpError("offsets shape and value shape differ: ")
           << offsets << " vs " << value;
  if (elementOf(value) != ptr.getElementType())
    return op->emitOpError("value element type ")
           << elementOf(value) << " differs from the pointer's "
           << ptr.getElementType();
  if (mask && shapeOf(mask.getType()) != shapeOf(offsets))
    return op->emitOpError("mask shape differs from the offsets shape");
  return success();
}

LogicalResult tile::LoadOp::verify() {
  if (getOther() && getOther().getType() != getPtr().getType().getElementType())
    return emitOpError("'other' must have the pointer's element type");
  return verifyAccess(*this, getPtr().getType(), getOffsets().getType(),
                      getType(), getMask());
}

LogicalResult tile::StoreOp::verify() {
  return verifyAccess(*this, getPtr().getType(), getOffsets().getType(),
                      getValue().getType(), getMask());
}

LogicalResult tile::DotOp::verify() {
  int64_t m = getM(), n = getN(), k = getK();
  if (m <= 0 || n <= 0 || k <= 0 || m % 16 || k % 16 || n % 8)
    return emitOpError("needs M and K multiples of 16 and N of 8, got M = ")
           << m << ", N = " << n << ", K = " << k;
  auto size = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements();
  };
  if (size(getA()) != m * k || size(getB()) != k * n ||
      size(getAcc()) != m * n || size(getResult()) != m * n)
    return emitOpError("tile sizes must be M*K, K*N, M*N and M*N for M = ")
           << m << ", N = " << n << ", K = " << k;
  if (cast<RankedTensorType>(getA().getType()).getElementType() !=
      cast<RankedTensorType>(getB().getType()).getElementType())
    return emitOpError("a and b must have one element type");
  return success();
}

LogicalResult tile::LoadBlockOp::verify() {
  auto result = cast<RankedTensorType>(getType());
  if (result.getNumElements() != getBlockRows() * getBlockCols())
    return emitOpError("a block of ")
           << getBlockRows() << " x " << getBlockCols() << " needs "
           << getBlockRows() * getBlockCols() << " elements, not "
           << result.getNumElements();
  if (result.getElementType() != getPtr().getType().getElementType())
    return emitOpError("the block must have the pointer's element type");
  return success();
}

LogicalResult tile::DotLoopOp::verify() {
  int64_t m = getM(), n = getN(), k = getK();
  if (!llvm::isPowerOf2_64(m) || !llvm::isPowerOf2_64(n) ||
      !llvm::isPowerOf2_64(k) || m < 16 || n < 16 || k < 16)
    return emitOpError("needs M, N and K powers of two of at least 16, got M = ")
           << m << ", N = " << n << ", K = " << k;
  if (cast<RankedTensorType>(getAcc().getType()).getNumElements() != m * n ||
      cast<RankedTensorType>(getType()).getNumElements() != m * n)
    return emitOpError("the accumulator and the result hold M*N elements");
  Type ea = getA().getType().getElementType();
  if (ea != getB().getType().getElementType() || !(ea.isBF16() || ea.isF16()))
    return emitOpError("a and b must both be bf16 or both f16");
  if (!isa<BlockArgument>(pointerRoot(getA())) ||
      !isa<BlockArgument>(pointerRoot(getB())))
    return emitOpError("a and b must be kernel arguments (global memory)");
  return success();
}

/// Shared checks of reduce_rows and broadcast_rows: `matrix` holds
/// `vector`'s size times `cols` elements of the same type.
static LogicalResult verifyRows(Operation *op, Value matrix, Value vector,
                                int64_t cols) {
  auto m = cast<RankedTensorType>(matrix.getType());
  auto v = cast<RankedTensorType>(vector.getType());
  if (cols <= 0 || m.getNumElements() != v.getNumElements() * cols)
    return op->emitOpError("needs a matrix of ")
           << v.getNumElements() << " x " << cols << " elements, got "
           << m.getNumElements();
  if (m.getElementType() != v.getElementType())
    return op->emitOpError("changes the element type");
  // The GPU lowering exchanges the R row values through shared memory (and
  // the matrix too where its rows do not lie in lanes of one warp: checked
  // by tile-lower-to-simt, which knows the layout).
  if (v.getNumElements() * v.getElementTypeBitWidth() / 8 > 32 * 1024)
    return op->emitOpError("needs at most 32 KiB of shared memory for the "
                           "row values");
  return success();
}

LogicalResult tile::ReduceRowsOp::verify() {
  return verifyRows(*this, getSrc(), getResult(), getCols());
}

LogicalResult tile::BroadcastRowsOp::verify() {
  return verifyRows(*this, getResult(), getSrc(), getCols());
}

LogicalResult tile::ClusterReduceOp::verify() {
  if (getSrcs().empty())
    return emitOpError("needs at least one operand");
  if (getSrcs().size() > 16)
    return emitOpError("combines at most 16 values at once");
  Type t = getSrcs().front().getType();
  for (Value v : llvm::concat<Value>(getSrcs(), getResults()))
    if (v.getType() != t)
      return emitOpError("operands and results must all have one type");
  if (getResults().size() != getSrcs().size())
    return emitOpError("needs one result per operand");
  auto func = (*this)->getParentOfType<func::FuncOp>();
  auto size = func ? func->getAttrOfType<IntegerAttr>(attr::kClusterSize)
                   : IntegerAttr();
  if (!size)
    return emitOpError("is only valid in a kernel with a '")
           << attr::kClusterSize << "' attribute";
  return success();
}

LogicalResult tile::SharedAllocOp::verify() {
  auto func = dyn_cast<func::FuncOp>((*this)->getParentOp());
  if (!func)
    return emitOpError("must be in the kernel's top-level block");
  Type et = getType().getElementType();
  if (!(et.isInteger(32) || et.isInteger(64) || et.isBF16() || et.isF16() ||
        et.isF32()))
    return emitOpError("holds i32, i64, bf16, f16 or f32, not ") << et;
  if (getOffset() % 16 != 0)
    return emitOpError("offset ") << getOffset() << " is not 16-byte aligned";
  auto total = func->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
  int64_t bytes = getSize() * (et.getIntOrFloatBitWidth() / 8);
  if (!total || getOffset() + bytes > total.getInt())
    return emitOpError("ends at byte ")
           << getOffset() + bytes << ", past the kernel's '"
           << attr::kSharedBytes << "'";
  return success();
}

Value tilejit::pointerRoot(Value p) {
  while (auto add = p.getDefiningOp<tile::AddPtrOp>())
    p = add.getPtr();
  return p;
}

LogicalResult tile::CopyAsyncOp::verify() {
  // cp.async writes shared memory and reads global memory only.
  if (!pointerRoot(getDst()).getDefiningOp<tile::SharedAllocOp>())
    return emitOpError("the destination must point into a tile.shared_alloc");
  if (!isa<BlockArgument>(pointerRoot(getSrc())))
    return emitOpError("the source must point into a kernel argument "
                       "(global memory)");
  if (getDst().getType() != getSrc().getType())
    return emitOpError("copies between pointers of one element type, not ")
           << getDst().getType() << " and " << getSrc().getType();
  if (!isa<RankedTensorType>(getDstOffsets().getType()) ||
      !isa<RankedTensorType>(getSrcOffsets().getType()))
    return emitOpError("copies tiles: both offsets must be tiles");
  if (shapeOf(getDstOffsets().getType()) != shapeOf(getSrcOffsets().getType()))
    return emitOpError("destination and source offsets differ in shape");
  if (getMask() &&
      shapeOf(getMask().getType()) != shapeOf(getSrcOffsets().getType()))
    return emitOpError("mask shape differs from the offsets shape");
  return success();
}

LogicalResult tile::ReduceOp::verify() {
  if (getSrc().getType().getElementType() != getType())
    return emitOpError("result type ")
           << getType() << " differs from the tile's element type "
           << getSrc().getType().getElementType();
  return success();
}
