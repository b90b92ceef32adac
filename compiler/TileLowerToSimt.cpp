//===- TileLowerToSimt.cpp - tile programs to per-thread SIMT code --------===//
//
// A program instance of P = simt.threads threads works on 1-D tiles. Thread t
// holds K = N / P elements of a tile of N elements, as a vector<K x T>, in
// groups of adjacent elements (layoutGroup, see TileAssignLayout.cpp): its
// loads and stores of consecutive offsets are 16-byte groups that can be
// vectorized, and a reduction is a thread-local vector.reduction followed by
// one block-wide combine. A row op whose rows lie within the groups stays
// inside each thread.
//
// The lowering is a dialect conversion, one kernel (func.func) at a time since
// P is fixed per kernel: tensor<N x T> -> vector<K x T>; the tile ops become
// simt/vector ops; arith/math ops on tiles are re-created on vectors; scf ops
// follow the new types. Scalars, pointers and tile.addptr are uniform and stay.
// Every thread executes the same control flow (the lowering is uniform), so
// simt.block_reduce, a barrier, is reached by all threads.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

namespace tilejit {
#define GEN_PASS_DEF_TILELOWERTOSIMT
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// The static shared memory a lone tile.dot may stage its tiles in.
constexpr int64_t kMaxDotStagingBytes = 48 * 1024;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// tensor<N x T> -> vector<N/P x T> for a kernel of P threads; every other
/// type is unchanged.
struct SimtTypeConverter : public TypeConverter {
  explicit SimtTypeConverter(int64_t threads) : threads(threads) {
    addConversion([](Type type) { return type; });
    addConversion([this](RankedTensorType type) -> Type {
      if (type.getRank() != 1 || type.getDimSize(0) % this->threads != 0)
        return nullptr;
      return VectorType::get({type.getDimSize(0) / this->threads},
                             type.getElementType());
    });
  }

  int64_t threads;
};

static bool hasTensorType(Operation *op) {
  auto isTensor = [](Type t) { return isa<TensorType>(t); };
  return llvm::any_of(op->getOperandTypes(), isTensor) ||
         llvm::any_of(op->getResultTypes(), isTensor);
}

/// The vector type a tile result converts to, or a match failure.
static FailureOr<VectorType> convertedVector(const TypeConverter &converter,
                                             Value tile,
                                             ConversionPatternRewriter &rw) {
  auto vec =
      dyn_cast_or_null<VectorType>(converter.convertType(tile.getType()));
  if (!vec)
    return rw.notifyMatchFailure(tile.getLoc(), "tile type not convertible");
  return vec;
}

//===----------------------------------------------------------------------===//
// Tile ops
//===----------------------------------------------------------------------===//

/// A grid query along one axis, renamed: same type, same axis attribute.
template <typename TileOp, typename SimtOp>
struct AxisQueryLowering : public OpConversionPattern<TileOp> {
  using OpConversionPattern<TileOp>::OpConversionPattern;
  using OpAdaptor = typename OpConversionPattern<TileOp>::OpAdaptor;
  LogicalResult
  matchAndRewrite(TileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<SimtOp>(op, op.getType(), op.getAxisAttr());
    return success();
  }
};
/// tile.program_id -> simt.block_id.
using ProgramIdLowering = AxisQueryLowering<tile::ProgramIdOp, simt::BlockIdOp>;
/// tile.num_programs -> simt.grid_dim.
using NumProgramsLowering =
    AxisQueryLowering<tile::NumProgramsOp, simt::GridDimOp>;

/// tile.arange -> broadcast(thread_id * G) + c, with the constant
/// c[e] = (e / G) * P * G + e % G (G: the tile's group, tile-assign-layout).
struct ArangeLowering : public OpConversionPattern<tile::ArangeOp> {
  ArangeLowering(const TypeConverter &converter, MLIRContext *ctx,
                 func::FuncOp kernel, int64_t threads)
      : OpConversionPattern(converter, ctx), kernel(kernel), threads(threads) {}
  func::FuncOp kernel;
  int64_t threads;
  LogicalResult
  matchAndRewrite(tile::ArangeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<VectorType> vec =
        convertedVector(*getTypeConverter(), op.getResult(), rewriter);
    if (failed(vec))
      return failure();
    Location loc = op.getLoc();
    int64_t k = vec->getNumElements();
    Type i32 = rewriter.getI32Type();
    Value tid = simt::ThreadIdOp::create(rewriter, loc, i32);
    int64_t width = layoutGroup(kernel, k * threads);
    Value widthCst = arith::ConstantOp::create(
        rewriter, loc, rewriter.getI32IntegerAttr(width));
    Value base = arith::MulIOp::create(rewriter, loc, tid, widthCst);
    Value baseVec = vector::BroadcastOp::create(rewriter, loc, *vec, base);
    SmallVector<int32_t> iota(k);
    for (int64_t i = 0; i < k; ++i)
      iota[i] = static_cast<int32_t>((i / width) * threads * width + i % width);
    Value iotaVec = arith::ConstantOp::create(
        rewriter, loc, DenseElementsAttr::get(*vec, ArrayRef<int32_t>(iota)));
    rewriter.replaceOpWithNewOp<arith::AddIOp>(op, baseVec, iotaVec);
    return success();
  }
};

/// tile.splat -> vector.broadcast.
struct SplatLowering : public OpConversionPattern<tile::SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tile::SplatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<VectorType> vec =
        convertedVector(*getTypeConverter(), op.getResult(), rewriter);
    if (failed(vec))
      return failure();
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(op, *vec,
                                                     adaptor.getSrc());
    return success();
  }
};

/// tile.load -> simt.load on the thread's own offsets/mask.
struct LoadLowering : public OpConversionPattern<tile::LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tile::LoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "result type not convertible");
    rewriter.replaceOpWithNewOp<simt::LoadOp>(
        op, type, adaptor.getPtr(), adaptor.getOffsets(), adaptor.getMask(),
        adaptor.getOther());
    return success();
  }
};

/// tile.store -> simt.store (a scalar store is guarded by the emitter).
struct StoreLowering : public OpConversionPattern<tile::StoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tile::StoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<simt::StoreOp>(
        op, adaptor.getPtr(), adaptor.getOffsets(), adaptor.getValue(),
        adaptor.getMask());
    return success();
  }
};

/// tile.copy_async -> simt.copy_async on the thread's own offsets/mask.
struct CopyAsyncLowering : public OpConversionPattern<tile::CopyAsyncOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tile::CopyAsyncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<simt::CopyAsyncOp>(
        op, adaptor.getDst(), adaptor.getDstOffsets(), adaptor.getSrc(),
        adaptor.getSrcOffsets(), adaptor.getMask());
    return success();
  }
};

/// A tile op whose simt form takes the same operands (each thread's
/// elements) and attributes: tile.dot, tile.dot_loop, tile.reduce_rows,
/// tile.broadcast_rows.
template <typename TileOp, typename SimtOp>
struct SameShapeLowering : public OpConversionPattern<TileOp> {
  using OpConversionPattern<TileOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileOp op, typename TileOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type type = this->getTypeConverter()->convertType(op.getType());
    if (!type)
      return failure();
    rewriter.replaceOpWithNewOp<SimtOp>(op, type, adaptor.getOperands(),
                                        op->getAttrs());
    return success();
  }
};

/// The vector combining kind of a tile reduction over `elem` elements.
static vector::CombiningKind combiningKind(ReduceKind kind, Type elem) {
  bool isFloat = isa<FloatType>(getElementTypeOrSelf(elem));
  switch (kind) {
  case ReduceKind::Sum:
    return vector::CombiningKind::ADD;
  case ReduceKind::Max:
    return isFloat ? vector::CombiningKind::MAXIMUMF
                   : vector::CombiningKind::MAXSI;
  case ReduceKind::Min:
    break;
  }
  return isFloat ? vector::CombiningKind::MINIMUMF
                 : vector::CombiningKind::MINSI;
}

/// Whether the rows of `cols` columns of a row op between tiles `a` and `b`
/// (the matrix is the larger) each lie within one thread's group, with the
/// vector entry of a row held by that thread (tile-assign-layout's
/// simt.groups).
static bool rowsAreThreadLocal(func::FuncOp kernel, Value a, Value b,
                               int64_t cols) {
  int64_t na = cast<RankedTensorType>(a.getType()).getNumElements();
  int64_t nb = cast<RankedTensorType>(b.getType()).getNumElements();
  return layoutGroup(kernel, std::min(na, nb)) * cols ==
         layoutGroup(kernel, std::max(na, nb));
}

/// A row op: inThread() where its rows are thread-local, else its simt form
/// (through shared memory).
template <typename RowOp, typename SimtOp>
struct RowsLowering : OpConversionPattern<RowOp> {
  RowsLowering(const TypeConverter &converter, MLIRContext *ctx,
               func::FuncOp kernel)
      : OpConversionPattern<RowOp>(converter, ctx), kernel(kernel) {}
  func::FuncOp kernel;

  LogicalResult
  matchAndRewrite(RowOp op, typename RowOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<VectorType> vec =
        convertedVector(*this->getTypeConverter(), op.getResult(), rewriter);
    if (failed(vec))
      return failure();
    if (!rowsAreThreadLocal(kernel, op.getSrc(), op.getResult(),
                            op.getCols())) {
      rewriter.replaceOpWithNewOp<SimtOp>(op, *vec, adaptor.getOperands(),
                                          op->getAttrs());
      return success();
    }
    SmallVector<Value> elements =
        inThread(op, adaptor.getSrc(), vec->getNumElements(), rewriter);
    rewriter.replaceOpWithNewOp<vector::FromElementsOp>(op, *vec, elements);
    return success();
  }

  /// The K elements of the thread's result.
  virtual SmallVector<Value> inThread(RowOp op, Value src, int64_t k,
                                      OpBuilder &b) const = 0;
};

/// Fails, with an error, where `op`'s rows cannot be combined across
/// threads: tj_reduce_rows combines a row held by lanes of one warp (whole
/// groups, C / G lanes dividing 32) by shuffles, and any other row through
/// shared memory with the whole matrix, which must fit 32 KiB (the verifier
/// bounds the row values).
static LogicalResult checkRowsExchange(func::FuncOp kernel,
                                       tile::ReduceRowsOp op) {
  auto m = cast<RankedTensorType>(op.getSrc().getType());
  int64_t g = layoutGroup(kernel, m.getNumElements()), c = op.getCols();
  bool inWarp = c % g == 0 && 32 % (c / g) == 0;
  if (inWarp || rowsAreThreadLocal(kernel, op.getSrc(), op.getResult(), c) ||
      m.getNumElements() * m.getElementTypeBitWidth() / 8 <= 32 * 1024)
    return success();
  return op.emitOpError("needs the ")
         << m.getNumElements() << "-element matrix in shared memory (rows of "
         << c << " columns are not whole groups of " << g
         << " elements in lanes of one warp), at most 32 KiB";
}

/// tile.reduce_rows in a thread: entry e of the result combines the C
/// elements e * C .. e * C + C - 1, in column order.
struct ReduceRowsLowering
    : RowsLowering<tile::ReduceRowsOp, simt::ReduceRowsOp> {
  using RowsLowering::RowsLowering;
  SmallVector<Value> inThread(tile::ReduceRowsOp op, Value src, int64_t k,
                              OpBuilder &b) const override {
    vector::CombiningKind kind = combiningKind(op.getKind(), op.getType());
    int64_t cols = op.getCols();
    SmallVector<Value> rows;
    for (int64_t e = 0; e < k; ++e) {
      Value acc = vector::ExtractOp::create(b, op.getLoc(), src, e * cols);
      for (int64_t j = 1; j < cols; ++j)
        acc = vector::makeArithReduction(
            b, op.getLoc(), kind,
            vector::ExtractOp::create(b, op.getLoc(), src, e * cols + j), acc);
      rows.push_back(acc);
    }
    return rows;
  }
};

/// tile.broadcast_rows in a thread: element e is entry e / C.
struct BroadcastRowsLowering
    : RowsLowering<tile::BroadcastRowsOp, simt::BroadcastRowsOp> {
  using RowsLowering::RowsLowering;
  SmallVector<Value> inThread(tile::BroadcastRowsOp op, Value src, int64_t k,
                              OpBuilder &b) const override {
    int64_t cols = op.getCols();
    SmallVector<Value> entries, elements;
    for (int64_t e = 0; e < k / cols; ++e)
      entries.push_back(vector::ExtractOp::create(b, op.getLoc(), src, e));
    for (int64_t e = 0; e < k; ++e)
      elements.push_back(entries[e / cols]);
    return elements;
  }
};

/// tile.reduce -> vector.reduction over the thread's elements, then
/// simt.block_reduce across the block.
struct ReduceLowering : public OpConversionPattern<tile::ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(tile::ReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    vector::CombiningKind kind = combiningKind(op.getKind(), op.getType());
    Value local = vector::ReductionOp::create(rewriter, op.getLoc(), kind,
                                              adaptor.getSrc());
    rewriter.replaceOpWithNewOp<simt::BlockReduceOp>(op, op.getType(),
                                                     op.getKind(), local);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// arith / math on tiles
//===----------------------------------------------------------------------===//

/// A dense splat tile constant -> the same splat as a vector.
struct SplatConstantLowering : public OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto dense = dyn_cast<SplatElementsAttr>(op.getValue());
    if (!dense)
      return rewriter.notifyMatchFailure(op, "only splat tile constants");
    FailureOr<VectorType> vec =
        convertedVector(*getTypeConverter(), op.getResult(), rewriter);
    if (failed(vec))
      return failure();
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, DenseElementsAttr::get(*vec, dense.getSplatValue<Attribute>()));
    return success();
  }
};

/// Any other arith/math op on tiles: the same op (same attributes, e.g. cmp
/// predicates and fastmath flags) on the converted operands and types.
struct ElementwiseLowering : public ConversionPattern {
  ElementwiseLowering(const TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa_and_nonnull<arith::ArithDialect, math::MathDialect>(
            op->getDialect()) ||
        isa<arith::ConstantOp>(op) || op->getNumRegions() != 0 ||
        !hasTensorType(op))
      return failure();
    FailureOr<Operation *> lowered =
        convertOpResultTypes(op, operands, *getTypeConverter(), rewriter);
    if (failed(lowered))
      return failure();
    rewriter.replaceOp(op, (*lowered)->getResults());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct TileLowerToSimtPass
    : public impl::TileLowerToSimtBase<TileLowerToSimtPass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs;
    getOperation().walk([&](func::FuncOp func) { funcs.push_back(func); });
    for (func::FuncOp func : funcs)
      if (failed(lowerFunc(func)))
        return signalPassFailure();
  }

  LogicalResult lowerFunc(func::FuncOp func) {
    bool usesTiles = func->hasAttr(attr::kKernel);
    func.walk([&](Operation *op) {
      if (isa_and_nonnull<tile::TileDialect>(op->getDialect()) ||
          hasTensorType(op))
        usesTiles = true;
    });
    if (!usesTiles)
      return success();

    auto threads = func->getAttrOfType<IntegerAttr>(attr::kThreads);
    if (!threads || threads.getInt() <= 0)
      return func.emitOpError("kernel '")
             << func.getSymName() << "' has no valid '" << attr::kThreads
             << "' attribute; run tile-assign-layout first";
    int64_t p = threads.getInt();

    // Check tile shapes and constants up front so that a bad one gets a clear
    // error rather than a generic conversion failure.
    WalkResult shapes = func.walk([&](Operation *op) {
      // A dot outside a dot loop stages its tiles in (static) shared memory.
      if (auto dot = dyn_cast<tile::DotOp>(op)) {
        int64_t m = dot.getM(), n = dot.getN(), k = dot.getK();
        if (int64_t bytes = (m * k + k * n) * 2 + m * n * 4;
            bytes > kMaxDotStagingBytes) {
          op->emitOpError("in kernel '")
              << func.getSymName() << "': a dot of " << m << " x " << k
              << " by " << k << " x " << n << " stages " << bytes
              << " bytes in shared memory (at most 48 KiB); tile-pipeline-dot "
                 "takes larger tiles in a loop whose only carried value is "
                 "the accumulator and whose body is only acc = dot(loadBlock, "
                 "loadBlock, acc), blocks powers of two of at least 16";
          return WalkResult::interrupt();
        }
      }
      if (auto cst = dyn_cast<arith::ConstantOp>(op);
          cst && isa<TensorType>(cst.getType()) &&
          !isa<SplatElementsAttr>(cst.getValue())) {
        op->emitOpError("in kernel '")
            << func.getSymName()
            << "': only splat tile constants are supported";
        return WalkResult::interrupt();
      }
      if (auto rows = dyn_cast<tile::ReduceRowsOp>(op);
          rows && failed(checkRowsExchange(func, rows)))
        return WalkResult::interrupt();
      for (Type t :
           llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
        if (!isa<TensorType>(t))
          continue;
        auto tensor = dyn_cast<RankedTensorType>(t);
        if (!tensor || tensor.getRank() != 1 || tensor.getDimSize(0) % p != 0) {
          op->emitOpError("in kernel '")
              << func.getSymName() << "': tile type " << t
              << " is not a 1-D tile whose size is a multiple of the " << p
              << " threads";
          return WalkResult::interrupt();
        }
        if (tensor.getDimSize(0) / p > kMaxElementsPerThread) {
          op->emitOpError("in kernel '")
              << func.getSymName() << "': tile type " << t << " holds "
              << tensor.getDimSize(0) / p << " elements per thread over " << p
              << " threads; at most " << kMaxElementsPerThread
              << " are supported";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (shapes.wasInterrupted())
      return failure();

    MLIRContext *ctx = &getContext();
    SimtTypeConverter converter(p);
    ConversionTarget target(*ctx);
    target.addLegalDialect<simt::SimtDialect, vector::VectorDialect,
                           func::FuncDialect>();
    target.addIllegalOp<tile::ArangeOp, tile::SplatOp, tile::LoadOp,
                        tile::StoreOp, tile::CopyAsyncOp, tile::ReduceOp,
                        tile::DotOp, tile::DotLoopOp, tile::LoadBlockOp,
                        tile::ReduceRowsOp, tile::BroadcastRowsOp,
                        tile::ProgramIdOp, tile::NumProgramsOp>();
    // Scalars and pointers only: the emitter prints them as they are.
    target.addLegalOp<tile::AddPtrOp, tile::ConstexprOp, tile::ClusterReduceOp,
                      tile::SharedAllocOp, tile::BarrierOp, tile::CopyCommitOp,
                      tile::CopyWaitOp, tile::PrefetchL2Op>();
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
        [](Operation *op) { return !hasTensorType(op); });

    RewritePatternSet patterns(ctx);
    patterns.add<ProgramIdLowering, NumProgramsLowering, SplatLowering,
                 LoadLowering, StoreLowering, CopyAsyncLowering, ReduceLowering,
                 SameShapeLowering<tile::DotOp, simt::DotOp>,
                 SameShapeLowering<tile::DotLoopOp, simt::DotLoopOp>,
                 SplatConstantLowering, ElementwiseLowering>(converter, ctx);
    patterns.add<ArangeLowering>(converter, ctx, func, p);
    patterns.add<ReduceRowsLowering, BroadcastRowsLowering>(converter, ctx,
                                                            func);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);

    if (failed(applyPartialConversion(func, target, std::move(patterns))))
      return func.emitOpError("could not lower kernel '")
             << func.getSymName() << "' to SIMT code";
    return success();
  }
};

} // namespace
} // namespace tilejit
