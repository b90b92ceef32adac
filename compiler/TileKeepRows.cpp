//===- TileKeepRows.cpp - keep a row on chip when it is walked again ------===//
//
// A kernel with `tile.keep_row = 1` reads the row once. Where a later walk
// over the same range (the same bounds and step SSA values, in the same
// block) loads a tile the first walk loaded too (the same pointer, offsets
// %i + arange(B), mask and fill, once one walk's induction variable stands
// for the other's), the first walk also stores that tile into a shared
// array and the later walk reads it there:
//
//   W1:  [lb, mid)  load x; store keep[offs - lb]     [mid, ub)  load x
//   W2:  [lb, mid)  load keep[offs - lb]              [mid, ub)  load x
//
// mid = lb + min(K, ub - lb). K, the elements kept per array, is the most
// the shared-memory budget holds, and no more than a program's slice of a
// row of `tile.row_extent` elements (when known; split rows give each
// program 1 / tile.split_rows of it). Beyond K the later walk reads global
// memory as before, so the result never depends on the row's length.
//
// Each lane reads back what it stored (one tile shape, one layout), and a
// tile.barrier separates the walks all the same. The rewrite is skipped for
// a load whose memory may be written after the first walk reads it (a store
// in the first walk or between the walks to memory that may overlap), except
// for the later walk's own store of the element it read (a gradient written
// in place over its input). Only rows are kept: loads at an offset from
// their argument (a vector every row reads, such as class weights, stays in
// L2).
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVectorExtras.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEKEEPROWS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// Shared memory the kept rows may take, below the 227 KiB a block can
/// have: the rest is left to block reductions and cluster slots.
constexpr int64_t kKeepBudgetBytes = 200 * 1024;

/// Whether some store in `region` (or in `op` itself) may write what `load`
/// reads.
bool writesUnder(Operation *op, tile::LoadOp load) {
  return op
      ->walk([&](tile::StoreOp store) {
        return mayOverlap(store.getPtr(), load.getPtr())
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Splits `walk` at `mid`: a copy of it over [lb, mid) is placed before it
/// (its values mapped in `map`), and the walk goes on over [mid, ub) from
/// the copy's results.
scf::ForOp peelHead(scf::ForOp walk, Value mid, IRMapping &map) {
  OpBuilder b(walk);
  auto head = cast<scf::ForOp>(b.clone(*walk, map));
  head.getUpperBoundMutable().set(mid);
  walk.getLowerBoundMutable().set(mid);
  for (auto [init, r] : llvm::zip(walk.getInitsMutable(), head.getResults()))
    init.set(r);
  return head;
}

/// Bytes of one element `load` reads.
int64_t elementBytes(tile::LoadOp load) {
  return cast<tile::PtrType>(load.getPtr().getType())
             .getElementType()
             .getIntOrFloatBitWidth() /
         8;
}

struct Keeper {
  func::FuncOp kernel;

  /// A program's slice of a row of `tile.row_extent` elements, in whole
  /// steps of `walk`; std::nullopt when the extent is unknown.
  std::optional<int64_t> slice(scf::ForOp walk) {
    int64_t step = walkStep(walk);
    auto extent = kernel->getAttrOfType<IntegerAttr>(attr::kRowExtent);
    auto split = kernel->getAttrOfType<IntegerAttr>(attr::kSplitRows);
    if (!extent || extent.getInt() <= 0)
      return std::nullopt;
    int64_t programs = split ? std::max<int64_t>(1, split.getInt()) : 1;
    return ceilDiv(ceilDiv(extent.getInt(), programs), step) * step;
  }

  int64_t capacity(scf::ForOp walk, int64_t bytesPerElement) {
    int64_t step = walkStep(walk);
    auto used = kernel->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
    int64_t budget = kKeepBudgetBytes - (used ? used.getInt() : 0);
    int64_t k = budget / bytesPerElement / step * step;
    if (std::optional<int64_t> s = slice(walk))
      k = std::min(k, *s);
    return k;
  }

  Value allocate(tile::LoadOp like, int64_t n) {
    auto used = kernel->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
    int64_t offset = used ? used.getInt() : 0;
    auto ptr = cast<tile::PtrType>(like.getPtr().getType());
    int64_t bytes = n * elementBytes(like);
    OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
    kernel->setAttr(attr::kSharedBytes,
                    b.getI64IntegerAttr(offset + ceilDiv(bytes, 16) * 16));
    return tile::SharedAllocOp::create(b, like.getLoc(), ptr, n, offset);
  }

  /// Rewrites `first` and the later walks that re-read its loads.
  void keep(scf::ForOp first, ArrayRef<scf::ForOp> later) {
    // The first walk's load each later load re-reads, and those kept.
    DenseMap<Operation *, tile::LoadOp> sourceOf;
    SetVector<Operation *> keptLoads;
    for (scf::ForOp walk : later) {
      WalkEquivalence eq(first, walk);
      for (auto load : walk.getBody()->getOps<tile::LoadOp>()) {
        // A row of the batch is addressed from an offset into its argument;
        // what every row reads at the argument itself (class weights, one
        // vector for all rows) stays in L2 and is not worth shared memory.
        if (!load.getPtr().getDefiningOp<tile::AddPtrOp>() ||
            getElementTypeOrSelf(load.getType()).isInteger(1) ||
            !isOwnTile(walk, load.getOffsets()) ||
            !storesKeepElements(walk, load))
          continue;
        for (auto source : first.getBody()->getOps<tile::LoadOp>()) {
          auto both = [&](Value x, Value y) {
            return x && y ? eq.equivalent(x, y) : !x && !y;
          };
          bool same = load.getType() == source.getType() &&
                      both(source.getPtr(), load.getPtr()) &&
                      both(source.getOffsets(), load.getOffsets()) &&
                      both(source.getMask(), load.getMask()) &&
                      both(source.getOther(), load.getOther());
          if (!same)
            continue;
          // Nothing may write the row between the read and the re-read.
          bool written = writesUnder(first, load);
          for (Operation *op = first->getNextNode(); op != walk && !written;
               op = op->getNextNode())
            written = writesUnder(op, load);
          if (!written) {
            sourceOf[load] = source;
            keptLoads.insert(source);
          }
          break;
        }
      }
    }
    if (sourceOf.empty())
      return;
    int64_t bytesPerElement = 0;
    for (Operation *op : keptLoads)
      bytesPerElement += elementBytes(cast<tile::LoadOp>(op));
    int64_t K = capacity(first, bytesPerElement);
    if (K < walkStep(first))
      return; // not one tile fits
    DenseMap<Operation *, Value> arrayOf;
    for (Operation *op : keptLoads)
      arrayOf[op] = allocate(cast<tile::LoadOp>(op), K);
    // Where the arrays hold a program's whole slice of the rows the kernel
    // is compiled for, the walks past them run only for longer rows.
    std::optional<int64_t> whole = slice(first);
    auto markTail = [&](scf::ForOp walk) {
      if (whole && K >= *whole)
        walk->setAttr(attr::kRowTail, UnitAttr::get(walk->getContext()));
    };

    // mid = lb + min(K, ub - lb), before the first walk.
    OpBuilder b(first);
    Location loc = first.getLoc();
    Value lb = first.getLowerBound(), ub = first.getUpperBound();
    Type t = ub.getType();
    Value k = arith::ConstantOp::create(b, loc, IntegerAttr::get(t, K));
    Value left = arith::SubIOp::create(b, loc, ub, lb);
    Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, left, k);
    Value mid = arith::SelectOp::create(b, loc, fits, ub,
                                        arith::AddIOp::create(b, loc, lb, k));

    // Offsets in the array: (%i - lb) + arange(B), the tile's own offsets
    // (isOwnTile) less lb, in the form the access vectorizer follows.
    auto localOffsets = [&](OpBuilder &at, tile::LoadOp load) -> Value {
      auto add = load.getOffsets().getDefiningOp<arith::AddIOp>();
      Value range = add.getLhs().getDefiningOp<tile::ArangeOp>() ? add.getLhs()
                                                                  : add.getRhs();
      auto loop = load->getParentOfType<scf::ForOp>();
      Value local = arith::SubIOp::create(at, loc, loop.getInductionVar(), lb);
      Value splat = tile::SplatOp::create(at, loc, range.getType(), local);
      return arith::AddIOp::create(at, loc, splat, range);
    };

    // The first walk: its head also fills the arrays.
    IRMapping map;
    peelHead(first, mid, map);
    markTail(first);
    for (Operation *op : keptLoads) {
      auto load = cast<tile::LoadOp>(map.lookup(op));
      OpBuilder at(load->getContext());
      at.setInsertionPointAfter(load);
      tile::StoreOp::create(at, loc, arrayOf[op], localOffsets(at, load),
                            load.getResult(), load.getMask());
    }

    // The later walks that re-read a kept tile: their heads read the
    // arrays, after one barrier.
    bool barrier = false;
    for (scf::ForOp walk : later) {
      auto rereads = llvm::filter_to_vector(
          walk.getBody()->getOps<tile::LoadOp>(),
          [&](tile::LoadOp load) { return sourceOf.contains(load); });
      if (rereads.empty())
        continue;
      if (!barrier) {
        OpBuilder wb(walk);
        tile::BarrierOp::create(wb, loc);
        barrier = true;
      }
      IRMapping wm;
      peelHead(walk, mid, wm);
      markTail(walk);
      for (tile::LoadOp load : rereads) {
        auto copy = cast<tile::LoadOp>(wm.lookup(load.getOperation()));
        OpBuilder at(copy);
        auto fromArray = tile::LoadOp::create(
            at, loc, copy.getType(), arrayOf[sourceOf[load]],
            localOffsets(at, copy), copy.getMask(), copy.getOther());
        copy.getResult().replaceAllUsesWith(fromArray.getResult());
        copy.erase();
      }
    }
  }

  void run() {
    // Walks by block, in order; the first of each range is the source.
    llvm::MapVector<Block *, SmallVector<scf::ForOp>> byBlock; // walk order
    kernel.walk([&](scf::ForOp loop) {
      if (isRowWalk(loop))
        byBlock[loop->getBlock()].push_back(loop);
    });
    for (auto &[block, loops] : byBlock) {
      llvm::sort(loops, [](scf::ForOp x, scf::ForOp y) {
        return x->isBeforeInBlock(y);
      });
      SmallVector<bool> used(loops.size(), false);
      for (size_t i = 0; i < loops.size(); ++i) {
        if (used[i])
          continue;
        SmallVector<scf::ForOp> later;
        for (size_t j = i + 1; j < loops.size(); ++j)
          if (loops[j].getLowerBound() == loops[i].getLowerBound() &&
              loops[j].getUpperBound() == loops[i].getUpperBound() &&
              loops[j].getStep() == loops[i].getStep()) {
            later.push_back(loops[j]);
            used[j] = true;
          }
        if (!later.empty())
          keep(loops[i], later);
      }
    }
  }
};

struct TileKeepRowsPass : public impl::TileKeepRowsBase<TileKeepRowsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto keep = kernel->getAttrOfType<IntegerAttr>(attr::kKeepRow);
      if (keep && keep.getInt() != 0)
        Keeper{kernel}.run();
    });
  }
};

} // namespace
} // namespace tilejit
