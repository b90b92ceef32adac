//===- InterpSimt.cpp - thread-level ops in the interpreter ----------------===//
//
// The simt and vector ops of a kernel after tile-lower-to-simt, on values
// that hold every thread's copy (InterpRunner.h). Ops that move elements
// between threads (row ops, dot, dot loops) gather the threads' elements
// into the tile, in the kernel's layout, apply the tile op's semantics and
// scatter the result back: thread t's element i of a tile of N = P K
// elements in groups of G (layoutGroup) is tile element
// t G + (i / G) P G + i % G, as tile.arange's lowering numbers it. Block
// reductions combine in the GPU's order (tj_block_reduce: a butterfly
// within each warp, then the warps' results in warp order), so a SIMT run
// and a GPU run add in the same order.
//
//===----------------------------------------------------------------------===//
#include "runtime/InterpRunner.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace tilejit {
namespace interp {

namespace {

/// The tile element that thread `t`'s element `i` holds.
int64_t tileElement(int64_t t, int64_t i, int64_t threads, int64_t group) {
  return t * group + (i / group) * threads * group + i % group;
}

} // namespace

RuntimeValue Runner::relayout(const RuntimeValue &v, Shape s, bool toTile) {
  int64_t p = k.lanes, n = s.n;
  if (static_cast<int64_t>(v.size()) != n || n % p != 0)
    fail("a thread-level value of " + std::to_string(v.size()) +
         " elements is not a tile of " + std::to_string(n));
  int64_t perThread = n / p, group = layoutGroup(k.func, n);
  if (group <= 0 || perThread % group != 0)
    fail("the layout's group of " + std::to_string(group) +
         " does not divide a thread's " + std::to_string(perThread) +
         " elements of a tile of " + std::to_string(n));
  auto move = [&](const auto &src) {
    using Vec = std::remove_cv_t<std::remove_reference_t<decltype(*src)>>;
    auto out = std::make_shared<Vec>(n);
    for (int64_t t = 0; t < p; ++t)
      for (int64_t i = 0; i < perThread; ++i) {
        int64_t e = tileElement(t, i, p, group), own = t * perThread + i;
        (*out)[toTile ? e : own] = (*src)[toTile ? own : e];
      }
    return out;
  };
  return v.f ? makeF(s, move(v.f)) : makeI(s, move(v.i));
}

void Runner::execSimt(Operation *op) {
  // The tile a vector<K> value of this kernel holds: K * P elements.
  auto tileShape = [&](Value v) {
    Shape s = shapeOf(v.getType());
    s.n *= k.lanes;
    return s;
  };
  if (isa<simt::ThreadIdOp>(op)) {
    auto ids = std::make_shared<IVec>(k.lanes);
    for (int64_t t = 0; t < k.lanes; ++t)
      (*ids)[t] = t;
    return set(op->getResult(0), makeI({Elem::I32, false, 1}, std::move(ids)));
  }
  if (auto b = dyn_cast<simt::BlockIdOp>(op))
    return set(b.getResult(), spread(intScalar(Elem::I32, pid[b.getAxis()])));
  if (auto g = dyn_cast<simt::GridDimOp>(op))
    return set(g.getResult(),
               spread(intScalar(Elem::I32, gridDim(g.getAxis()))));
  if (auto br = dyn_cast<simt::BlockReduceOp>(op)) {
    const RuntimeValue &src = get(br.getSrc());
    Shape s = shapeOf(br.getType());
    ReduceKind kind = br.getKind();
    if (k.lanes % 32 != 0 || src.size() != size_t(k.lanes))
      fail("simt.block_reduce needs one scalar per thread of whole warps");
    int64_t warps = k.lanes / 32;
    // A butterfly within each warp, then the warps' results in order.
    auto reduce = [&](auto x, auto combine) {
      for (int offset = 16; offset > 0; offset >>= 1) {
        auto y = x;
        for (int64_t t = 0; t < k.lanes; ++t)
          y[t] = combine(x[t], x[t ^ offset]);
        x = std::move(y);
      }
      auto r = x[0];
      for (int64_t w = 1; w < warps; ++w)
        r = combine(r, x[w * 32]);
      return r;
    };
    if (src.f) {
      float r = reduce(*src.f,
                       [&](float a, float b) { return combineF(kind, a, b); });
      return set(br.getResult(),
                 spread(makeF(s, std::make_shared<FVec>(1, r))));
    }
    int64_t r = reduce(*src.i, [&](int64_t a, int64_t b) {
      return combineI(kind, a, b, s.elem);
    });
    return set(br.getResult(), spread(intScalar(s.elem, r)));
  }
  if (auto load = dyn_cast<simt::LoadOp>(op)) {
    const RuntimeValue *mask = load.getMask() ? &get(load.getMask()) : nullptr;
    const RuntimeValue *other =
        load.getOther() ? &get(load.getOther()) : nullptr;
    return set(load.getResult(),
               loadElements(get(load.getPtr()), intOperand(op, 1), mask, other,
                            shapeOf(load.getType())));
  }
  if (auto store = dyn_cast<simt::StoreOp>(op)) {
    const RuntimeValue *mask =
        store.getMask() ? &get(store.getMask()) : nullptr;
    if (isa<VectorType>(store.getOffsets().getType()))
      return storeElements(get(store.getPtr()), intOperand(op, 1),
                           get(store.getValue()), mask);
    // A scalar store is thread 0's alone, as the GPU makes it.
    auto first = [](RuntimeValue v) {
      if (v.f)
        v.f = std::make_shared<FVec>(1, v.f->front());
      if (v.i)
        v.i = std::make_shared<IVec>(1, v.i->front());
      return v;
    };
    RuntimeValue firstMask = mask ? first(*mask) : RuntimeValue();
    return storeElements(get(store.getPtr()), first(intOperand(op, 1)),
                         first(get(store.getValue())),
                         mask ? &firstMask : nullptr);
  }
  if (auto copy = dyn_cast<simt::CopyAsyncOp>(op))
    return execCopyAsync(copy);
  if (auto rr = dyn_cast<simt::ReduceRowsOp>(op)) {
    Shape to = tileShape(rr.getResult());
    RuntimeValue rows =
        reduceRows(relayout(get(rr.getSrc()), tileShape(rr.getSrc()), true),
                   rr.getKind(), rr.getCols(), to);
    return set(rr.getResult(), relayout(rows, to, false));
  }
  if (auto br = dyn_cast<simt::BroadcastRowsOp>(op)) {
    Shape to = tileShape(br.getResult());
    RuntimeValue tile =
        broadcastRows(relayout(get(br.getSrc()), tileShape(br.getSrc()), true),
                      br.getCols(), to);
    return set(br.getResult(), relayout(tile, to, false));
  }
  if (auto dot = dyn_cast<simt::DotOp>(op)) {
    Shape to = tileShape(dot.getResult());
    RuntimeValue acc =
        relayout(get(dot.getAcc()), tileShape(dot.getAcc()), true);
    auto out = std::make_shared<FVec>(*acc.f);
    accumulateProduct(*relayout(get(dot.getA()), tileShape(dot.getA()), true).f,
                      *relayout(get(dot.getB()), tileShape(dot.getB()), true).f,
                      *out, dot.getM(), dot.getN(), dot.getK());
    return set(dot.getResult(), relayout(makeF(to, std::move(out)), to, false));
  }
  if (auto dl = dyn_cast<simt::DotLoopOp>(op)) {
    Shape to = tileShape(dl.getResult());
    RuntimeValue product =
        dotLoop(dl, relayout(get(dl.getAcc()), tileShape(dl.getAcc()), true));
    return set(dl.getResult(), relayout(product, to, false));
  }
  fail("unsupported simt op in the CPU interpreter");
}

void Runner::execVector(Operation *op) {
  if (op->getNumResults() != 1)
    fail("unsupported vector op in the CPU interpreter");
  Value res = op->getResult(0);
  Shape s = shapeOf(res.getType());
  int64_t p = k.lanes, width = s.n; // elements per thread
  // result[t * width + i] = f(t, i), floats or integers as `like` holds.
  auto perThread = [&](const RuntimeValue &like, auto elemF, auto elemI) {
    if (like.f) {
      auto out = std::make_shared<FVec>(p * width);
      for (int64_t t = 0; t < p; ++t)
        for (int64_t i = 0; i < width; ++i)
          (*out)[t * width + i] = elemF(t, i);
      return set(res, makeF(s, std::move(out)));
    }
    auto out = std::make_shared<IVec>(p * width);
    for (int64_t t = 0; t < p; ++t)
      for (int64_t i = 0; i < width; ++i)
        (*out)[t * width + i] = elemI(t, i);
    set(res, makeI(s, std::move(out)));
  };
  // A thread's copy of scalar or vector `v` repeated over the result.
  auto broadcast = [&](Value v) {
    const RuntimeValue &src = get(v);
    int64_t w = src.size() / p;
    if (w != 1 && w != width)
      fail("unsupported broadcast shape");
    auto at = [&](int64_t t, int64_t i) { return t * w + (w == 1 ? 0 : i); };
    perThread(
        src, [&](int64_t t, int64_t i) { return (*src.f)[at(t, i)]; },
        [&](int64_t t, int64_t i) { return (*src.i)[at(t, i)]; });
  };
  if (auto b = dyn_cast<vector::BroadcastOp>(op))
    return broadcast(b.getSource());
  if (op->getName().getStringRef() == "vector.splat")
    return broadcast(op->getOperand(0));
  if (isa<vector::StepOp>(op))
    return perThread(
        RuntimeValue{}, [](int64_t, int64_t i) { return float(i); },
        [](int64_t, int64_t i) { return i; });
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    SmallVector<const RuntimeValue *> elems;
    for (Value v : fe.getElements())
      elems.push_back(&get(v));
    return perThread(
        *elems[0], [&](int64_t t, int64_t i) { return (*elems[i]->f)[t]; },
        [&](int64_t t, int64_t i) { return (*elems[i]->i)[t]; });
  }
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    const RuntimeValue &src = get(ex.getSource());
    auto pos = ex.getMixedPosition();
    if (pos.empty())
      return set(res, src);
    if (pos.size() > 1)
      fail("only 1-D extracts are supported");
    int64_t w = src.size() / p;
    const RuntimeValue *dynamic = nullptr;
    int64_t fixed = 0;
    if (auto a = dyn_cast<Attribute>(pos[0]))
      fixed = cast<IntegerAttr>(a).getInt();
    else
      dynamic = &get(cast<Value>(pos[0]));
    auto at = [&](int64_t t) {
      int64_t i = dynamic ? (*dynamic->i)[t] : fixed;
      if (i < 0 || i >= w)
        fail("extract position " + std::to_string(i) + " outside a vector of " +
             std::to_string(w));
      return t * w + i;
    };
    return perThread(
        src, [&](int64_t t, int64_t) { return (*src.f)[at(t)]; },
        [&](int64_t t, int64_t) { return (*src.i)[at(t)]; });
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    const RuntimeValue &src = get(red.getVector());
    int64_t w = src.size() / p;
    const RuntimeValue *acc = red.getAcc() ? &get(red.getAcc()) : nullptr;
    using CK = vector::CombiningKind;
    CK kind = red.getKind();
    // In element order from the accumulator or element 0, each step
    // rounded to the element type, as the emitted loop computes it.
    auto floatStep = [&](float a, float b) {
      switch (kind) {
      case CK::ADD:
        return a + b;
      case CK::MUL:
        return a * b;
      case CK::MAXIMUMF:
        return maximumF(a, b);
      case CK::MINIMUMF:
        return minimumF(a, b);
      case CK::MAXNUMF:
        return maxnumF(a, b);
      case CK::MINNUMF:
        return minnumF(a, b);
      default:
        fail("reduction kind does not fit the element type");
      }
    };
    auto intStep = [&](int64_t a, int64_t b) -> int64_t {
      Elem e = s.elem;
      switch (kind) {
      case CK::ADD:
        return normalize(uint64_t(a) + uint64_t(b), e);
      case CK::MUL:
        return normalize(uint64_t(a) * uint64_t(b), e);
      case CK::MAXSI:
        return std::max(a, b);
      case CK::MINSI:
        return std::min(a, b);
      case CK::MAXUI:
        return zext(a, e) > zext(b, e) ? a : b;
      case CK::MINUI:
        return zext(a, e) < zext(b, e) ? a : b;
      case CK::AND:
        return a & b;
      case CK::OR:
        return a | b;
      case CK::XOR:
        return normalize(uint64_t(a ^ b), e);
      default:
        fail("reduction kind does not fit the element type");
      }
    };
    auto reduce = [&](const auto &x, const auto *init, auto step, int64_t t) {
      auto r = init ? (*init)[t] : x[t * w];
      for (int64_t i = init ? 0 : 1; i < w; ++i)
        r = step(r, x[t * w + i]);
      return r;
    };
    return perThread(
        src,
        [&](int64_t t, int64_t) {
          return reduce(
              *src.f, acc ? acc->f.get() : nullptr,
              [&](float a, float b) {
                return roundTo(floatStep(a, b), s.elem);
              },
              t);
        },
        [&](int64_t t, int64_t) {
          return reduce(*src.i, acc ? acc->i.get() : nullptr, intStep, t);
        });
  }
  fail("unsupported vector op in the CPU interpreter");
}

} // namespace interp
} // namespace tilejit
