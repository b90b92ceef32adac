//===- TileSplitRows.cpp - split each row over a thread-block cluster -----===//
//
// A kernel with `tile.split_rows = C` is a row kernel whose program p along
// x handles row p. The pass makes C programs of a cluster share the row:
// program p of the launch (C times as many along x) handles row p / C, and
// each of its walks over the row, `scf.for %i = 0 to %ub step B`, runs its
// own slice
//
//   per = ceil(ceil(ub / C) / B) * B,  [r * per, min(ub, (r + 1) * per))
//
// for rank r = p % C, so slices start on tile boundaries and the tiles'
// masks stay as they were. What a walk carries across iterations is a
// reduction over the row: its partial is combined over the cluster
// (tile.cluster_reduce) right after the walk, so everything after it sees
// the whole row's value on every program. A carried tile (one partial per
// lane) is combined where it is reduced to a scalar. Stores outside the
// walks (a row's loss) are made by rank 0 alone.
//
// What it assumes of a row kernel: a walk's iterations touch disjoint
// elements and communicate only through what the walk carries. Carried
// values must be add/max/min reductions; anything else is an error naming
// the walk, as is a kernel that already uses clusters.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"

#include <limits>

namespace tilejit {
#define GEN_PASS_DEF_TILESPLITROWS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

Value constantLike(OpBuilder &b, Location loc, Type t, int64_t v) {
  return arith::ConstantOp::create(b, loc, IntegerAttr::get(t, v));
}

/// The identity of a sum, as a scalar or a tile of the carried type.
Value zeroOf(OpBuilder &b, Location loc, Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  Type elem = tensor ? tensor.getElementType() : t;
  Value zero = isa<FloatType>(elem)
                   ? Value(arith::ConstantOp::create(b, loc, FloatAttr::get(elem, 0.0)))
                   : constantLike(b, loc, elem, 0);
  return tensor ? Value(tile::SplatOp::create(b, loc, t, zero)) : zero;
}

struct Splitter {
  func::FuncOp kernel;
  int64_t C;
  Value rank, isFirst; // i32 rank in the cluster; rank == 0
  // Slice bounds by (upper bound, step): every walk over the same range
  // gets the same SSA values, which tile-keep-rows relies on.
  DenseMap<std::pair<Value, int64_t>, std::pair<Value, Value>> slices;
  DenseSet<Operation *> walks;

  LogicalResult fail(Operation *op, const Twine &why) {
    return op->emitOpError("in kernel '")
           << kernel.getSymName() << "': tile.split_rows = " << C << ": "
           << why;
  }

  std::pair<Value, Value> sliceOf(scf::ForOp loop) {
    Value ub = loop.getUpperBound();
    int64_t step = walkStep(loop);
    auto &slot = slices[{ub, step}];
    if (slot.first)
      return slot;
    OpBuilder b(kernel.getContext());
    if (Operation *def = ub.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointAfter(rank.getDefiningOp());
    Location loc = loop.getLoc();
    Type t = ub.getType();
    auto c = [&](int64_t v) { return constantLike(b, loc, t, v); };
    // per = ceil(ub / (C B)) * B without forming ub + C B - 1 (ub may be
    // near the type's maximum).
    Value cb = c(C * step);
    Value q = arith::DivSIOp::create(b, loc, ub, cb);
    Value r = arith::RemSIOp::create(b, loc, ub, cb);
    Value up = arith::ExtUIOp::create(
        b, loc, t,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, c(0)));
    Value tiles = arith::AddIOp::create(b, loc, q, up);
    Value per = arith::MulIOp::create(b, loc, tiles, c(step));
    Value rk = t.isInteger(32) ? rank : arith::ExtSIOp::create(b, loc, t, rank);
    Value lo = arith::MulIOp::create(b, loc, rk, per);
    // hi = lo + min(per, ub - lo): ub - lo cannot overflow, nor can the sum,
    // which is at most ub.
    Value left = arith::SubIOp::create(b, loc, ub, lo);
    Value ends = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, left,
                                       per);
    Value count = arith::SelectOp::create(b, loc, ends, left, per);
    Value hi = arith::AddIOp::create(b, loc, lo, count);
    slot = {lo, hi};
    return slot;
  }

  /// The carried (m, d) pairs of online-softmax states: m yielded as
  /// m_next and d as d_next of one tile.softmax_fold over the two iter_args
  /// (each used by it alone), the results used only by tile.softmax_total.
  std::optional<std::pair<unsigned, unsigned>> softmaxPair(scf::ForOp loop,
                                                           unsigned i) {
    auto fold =
        loop.getYieldedValues()[i].getDefiningOp<tile::SoftmaxFoldOp>();
    auto args = loop.getRegionIterArgs();
    if (!fold || fold.getMNext() != loop.getYieldedValues()[i] ||
        fold.getM() != args[i] || !args[i].hasOneUse() ||
        !fold.getMNext().hasOneUse() || !fold.getDNext().hasOneUse())
      return std::nullopt;
    for (unsigned j = 0; j < args.size(); ++j)
      if (loop.getYieldedValues()[j] == fold.getDNext() &&
          fold.getD() == args[j] && args[j].hasOneUse()) {
        for (Value r : {loop.getResult(i), loop.getResult(j)})
          for (Operation *user : r.getUsers()) {
            auto total = dyn_cast<tile::SoftmaxTotalOp>(user);
            if (!total || total.getM() != loop.getResult(i) ||
                total.getD() != loop.getResult(j))
              return std::nullopt;
          }
        return std::make_pair(i, j);
      }
    return std::nullopt;
  }

  /// rank == 0, as a scalar or as a tile of `like`'s shape.
  Value firstLike(OpBuilder &b, Location loc, Type like) {
    auto t = dyn_cast<RankedTensorType>(like);
    return t ? Value(tile::SplatOp::create(
                   b, loc, RankedTensorType::get(t.getShape(), b.getI1Type()),
                   isFirst))
             : isFirst;
  }

  /// The start value of a carried value: its own on rank 0, `identity`
  /// elsewhere, so that the cluster counts it once.
  void startOnFirst(OpBuilder &b, Location loc, OpOperand &init, Value identity) {
    Value first = firstLike(b, loc, identity.getType());
    init.set(arith::SelectOp::create(b, loc, first, init.get(), identity));
  }

  /// After each tile.softmax_total of a split state: the programs' maxes
  /// M_r and sums S_r become M = max M_r and S = sum S_r exp(M_r - M') over
  /// the cluster (M' = M, or 0 when the row is empty).
  void combineSoftmax(tile::SoftmaxTotalOp total) {
    OpBuilder b(total->getContext());
    b.setInsertionPointAfter(total);
    Location loc = total.getLoc();
    auto f32 = b.getF32Type();
    auto kind = [&](ReduceKind k) {
      return ReduceKindAttr::get(b.getContext(), k);
    };
    Value own = total.getMax(), sum = total.getSum();
    auto rowMax = tile::ClusterReduceOp::create(
        b, loc, TypeRange{f32}, kind(ReduceKind::Max), ValueRange{own});
    Value all = rowMax.getResult(0);
    Value negInf = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
    Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, all,
                                        negInf);
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    Value shift = arith::SelectOp::create(b, loc, empty, zero, all);
    auto diff = arith::SubFOp::create(b, loc, own, shift);
    Value scale = math::ExpOp::create(b, loc, diff, arith::FastMathFlags::afn);
    auto mine = arith::MulFOp::create(b, loc, sum, scale);
    auto rowSum = tile::ClusterReduceOp::create(
        b, loc, TypeRange{f32}, kind(ReduceKind::Sum), ValueRange{mine});
    own.replaceAllUsesExcept(
        all, SmallPtrSet<Operation *, 2>{rowMax.getOperation(),
                                         diff.getOperation()});
    sum.replaceAllUsesExcept(rowSum.getResult(0), mine.getOperation());
  }

  /// Combines the walk's partial reductions over the cluster.
  LogicalResult combine(scf::ForOp loop) {
    unsigned n = loop.getNumRegionIterArgs();
    SmallVector<std::optional<ReduceKind>> kinds(n);
    SmallVector<std::pair<unsigned, unsigned>> pairs;
    DenseSet<unsigned> inPair;
    for (unsigned i = 0; i < n; ++i)
      if (auto p = softmaxPair(loop, i)) {
        pairs.push_back(*p);
        inPair.insert(p->first);
        inPair.insert(p->second);
      }
    for (unsigned i = 0; i < n; ++i) {
      if (inPair.contains(i))
        continue;
      kinds[i] = carriedCombine(loop, i);
      if (!kinds[i])
        return fail(loop, "value " + Twine(i) +
                              " the walk carries is not an add, max or min "
                              "reduction or an online-softmax state, so its "
                              "partials cannot be combined");
      Value result = loop.getResult(i);
      if (isa<RankedTensorType>(result.getType()))
        for (Operation *user : result.getUsers()) {
          auto reduce = dyn_cast<tile::ReduceOp>(user);
          if (!reduce || reduce.getKind() != *kinds[i])
            return fail(loop, "the per-lane partials it carries in value " +
                                  Twine(i) +
                                  " are used other than by a reduction of "
                                  "the same kind");
        }
    }
    // Every program of the cluster must reach each combine: none may sit in
    // a loop (another walk runs a different number of times per program).
    for (unsigned i = 0; i < n; ++i)
      for (Operation *user : loop.getResult(i).getUsers())
        if (isa<RankedTensorType>(loop.getResult(i).getType()) &&
            (user->getParentOfType<scf::ForOp>() ||
             user->getParentOfType<scf::WhileOp>()))
          return fail(user, "a reduction of what a walk carries is inside a "
                            "loop, where the programs of a cluster cannot all "
                            "meet to combine it");
    for (unsigned i = 0; i < n; ++i) {
      Type t = loop.getResult(i).getType();
      if (!kinds[i] || isa<RankedTensorType>(t))
        continue;
      if (!t.isF32() && !t.isInteger(32) && !t.isInteger(64))
        return fail(loop, "value " + Twine(i) + " the walk carries is a " +
                              "scalar of a type the cluster cannot combine "
                              "(it takes f32, i32 and i64)");
    }
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    // A sum's start value (and a softmax state's) is counted once: on rank 0.
    for (unsigned i = 0; i < n; ++i)
      if (kinds[i] == ReduceKind::Sum) {
        OpOperand &init = loop.getInitsMutable()[i];
        startOnFirst(b, loc, init, zeroOf(b, loc, init.get().getType()));
      }
    for (auto [mi, di] : pairs) {
      OpOperand &m = loop.getInitsMutable()[mi], &d = loop.getInitsMutable()[di];
      Type t = m.get().getType();
      Value negInf = arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
      startOnFirst(b, loc, m, tile::SplatOp::create(b, loc, t, negInf));
      startOnFirst(b, loc, d, zeroOf(b, loc, t));
      for (Operation *user :
           llvm::make_early_inc_range(loop.getResult(mi).getUsers()))
        combineSoftmax(cast<tile::SoftmaxTotalOp>(user));
    }
    // Scalars: one cluster_reduce per kind and type, right after the walk.
    b.setInsertionPointAfter(loop);
    llvm::MapVector<std::pair<int, Type>, SmallVector<Value>> groups;
    for (unsigned i = 0; i < n; ++i) {
      Value r = loop.getResult(i);
      if (!kinds[i] || isa<RankedTensorType>(r.getType()) || r.use_empty())
        continue;
      groups[{int(*kinds[i]), r.getType()}].push_back(r);
    }
    for (auto &[key, values] : groups)
      for (size_t at = 0; at < values.size(); at += 16) // 16 per combine
        replaceByCombined(
            b, loc, ReduceKind(key.first),
            ArrayRef<Value>(values).slice(at, std::min<size_t>(16, values.size() - at)));
    // Tiles: each reduction of them is combined where it happens.
    for (unsigned i = 0; i < n; ++i) {
      Value r = loop.getResult(i);
      if (!kinds[i] || !isa<RankedTensorType>(r.getType()))
        continue;
      for (Operation *user : llvm::make_early_inc_range(r.getUsers())) {
        OpBuilder after(user->getContext());
        after.setInsertionPointAfter(user);
        replaceByCombined(after, user->getLoc(), *kinds[i],
                          {user->getResult(0)});
      }
    }
    return success();
  }

  void replaceByCombined(OpBuilder &b, Location loc, ReduceKind kind,
                         ArrayRef<Value> values) {
    SmallVector<Type> types;
    for (Value v : values)
      types.push_back(v.getType());
    auto op = tile::ClusterReduceOp::create(
        b, loc, types, ReduceKindAttr::get(b.getContext(), kind), values);
    for (auto [v, combined] : llvm::zip(values, op.getResults()))
      Value(v).replaceAllUsesExcept(combined, op);
  }

  LogicalResult run() {
    if (kernel.walk([](tile::ClusterReduceOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      return fail(kernel, "the kernel already combines over a cluster");
    auto cluster = kernel->getAttrOfType<IntegerAttr>(attr::kClusterSize);
    if (!cluster || cluster.getInt() != C)
      return fail(kernel, "needs tile.cluster_size = " + Twine(C));
    if (kernel.walk([](tile::NumProgramsOp op) {
                return op.getAxis() == 0 ? WalkResult::interrupt()
                                         : WalkResult::advance();
              }).wasInterrupted())
      return fail(kernel, "num_programs(0) would count the split programs");

    // The program's row and its rank among the row's programs.
    Block &entry = kernel.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    Location loc = kernel.getLoc();
    Value pid = tile::ProgramIdOp::create(b, loc, b.getI32Type(), 0);
    Value c = constantLike(b, loc, b.getI32Type(), C);
    Value row = arith::DivSIOp::create(b, loc, pid, c);
    rank = arith::RemSIOp::create(b, loc, pid, c);
    isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rank,
                                    constantLike(b, loc, b.getI32Type(), 0));
    kernel.walk([&](tile::ProgramIdOp op) {
      if (op.getAxis() == 0 && op.getResult() != pid) {
        op.getResult().replaceAllUsesWith(row);
        op.erase();
      }
    });

    SmallVector<scf::ForOp> loops;
    kernel.walk([&](scf::ForOp loop) {
      APInt lb;
      if (isRowWalk(loop) &&
          matchPattern(loop.getLowerBound(), m_ConstantInt(&lb)) &&
          lb.isZero())
        loops.push_back(loop);
    });
    if (loops.empty())
      return fail(kernel, "the kernel has no walk over a row "
                          "(scf.for from 0 with a constant step)");
    for (scf::ForOp loop : loops) {
      Value ub = loop.getUpperBound();
      if (!ub.getType().isInteger(32) && !ub.getType().isInteger(64))
        return fail(loop, "a walk's bound must be i32 or i64");
      if (isa<BlockArgument>(ub) && ub.getParentBlock() != &entry)
        return fail(loop, "a walk's bound must be a kernel argument or "
                          "computed in the kernel");
      auto [lo, hi] = sliceOf(loop);
      loop.getLowerBoundMutable().set(lo);
      loop.getUpperBoundMutable().set(hi);
      if (failed(combine(loop)))
        return failure();
      walks.insert(loop);
    }
    kernel->setAttr(attr::kRowsSplit, b.getI64IntegerAttr(C));

    // Stores outside the walks write a row's values: rank 0 writes them.
    kernel.walk([&](tile::StoreOp store) {
      for (Operation *p = store->getParentOp(); p != kernel; p = p->getParentOp())
        if (walks.contains(p))
          return;
      OpBuilder sb(store);
      Value first = firstLike(sb, store.getLoc(), store.getOffsets().getType());
      Value mask = store.getMask()
                       ? Value(arith::AndIOp::create(sb, store.getLoc(),
                                                     store.getMask(), first))
                       : first;
      store.getMaskMutable().assign(mask);
    });
    return success();
  }
};

struct TileSplitRowsPass : public impl::TileSplitRowsBase<TileSplitRowsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto split = kernel->getAttrOfType<IntegerAttr>(attr::kSplitRows);
      if (!split || split.getInt() <= 1)
        return;
      Splitter s;
      s.kernel = kernel;
      s.C = split.getInt();
      if (failed(s.run()))
        signalPassFailure();
    });
  }
};

} // namespace
} // namespace tilejit
