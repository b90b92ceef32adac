//===- InterpMemory.cpp - memory, reductions, products and control flow -----===//
//
// Masked loads and stores over the bounded host buffers, reductions (in
// the GPU's order), row ops, dot and dot loops, cluster combines, and
// scf loops and branches in the interpreter.
//
//===----------------------------------------------------------------------===//
#include "runtime/InterpRunner.h"

namespace tilejit {
namespace interp {

template <typename Fn> void withBufferType(DType t, Fn fn) {
  switch (t) {
  case DType::I1:
    return fn(static_cast<uint8_t *>(nullptr));
  case DType::I32:
    return fn(static_cast<int32_t *>(nullptr));
  case DType::I64:
    return fn(static_cast<int64_t *>(nullptr));
  case DType::BF16:
  case DType::F16:
    return fn(static_cast<uint16_t *>(nullptr));
  case DType::F32:
    return fn(static_cast<float *>(nullptr));
  }
}

void Runner::execLoad(tile::LoadOp op) {
  const RuntimeValue &ptr = get(op.getPtr());
  const RuntimeValue &offs = intOperand(op, 1);
  const RuntimeValue *mask = op.getMask() ? &get(op.getMask()) : nullptr;
  const RuntimeValue *other = op.getOther() ? &get(op.getOther()) : nullptr;
  set(op.getResult(),
      loadElements(ptr, offs, mask, other, shapeOf(op.getType())));
}

RuntimeValue Runner::loadElements(const RuntimeValue &ptr,
                                  const RuntimeValue &offs,
                                  const RuntimeValue *mask,
                                  const RuntimeValue *other, Shape s) {
  if (ptr.elem != Elem::Ptr || ptr.ptrArg < 0)
    fail("load from a non-pointer value");
  size_t n = offs.size();
  size_t maskDiv = mask ? repeatOf(mask->size(), n) : 1;
  size_t otherDiv = other ? repeatOf(other->size(), n) : 1;
  const InterpBuffer &buf = bufferOf(ptr);
  const int64_t *po = offs.i->data();
  const int64_t *pm = mask ? mask->i->data() : nullptr;
  DType dt = buf.dtype;
  const int64_t size = buf.numElements;

  if (isFloatElem(s.elem)) {
    auto out = std::make_shared<FVec>(n, 0.0f);
    float *dst = out->data();
    if (other)
      for (size_t j = 0; j < n; ++j)
        dst[j] = (*other->f)[j / otherDiv];
    withBufferType(dt, [&](auto *typed) {
      using T = std::remove_pointer_t<decltype(typed)>;
      const T *base = static_cast<const T *>(buf.data);
      for (size_t j = 0; j < n; ++j) {
        if (pm && !pm[j / maskDiv])
          continue;
        int64_t o = checkedOffset(ptr, size, po[j], j, "load");
        if constexpr (std::is_same_v<T, uint16_t>)
          dst[j] =
              dt == DType::BF16 ? bf16ToFloat(base[o]) : halfToFloat(base[o]);
        else
          dst[j] = static_cast<float>(base[o]);
      }
    });
    return makeF(s, std::move(out));
  }
  auto out = std::make_shared<IVec>(n, 0);
  int64_t *dst = out->data();
  if (other)
    for (size_t j = 0; j < n; ++j)
      dst[j] = (*other->i)[j / otherDiv];
  withBufferType(dt, [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const T *base = static_cast<const T *>(buf.data);
    for (size_t j = 0; j < n; ++j) {
      if (pm && !pm[j / maskDiv])
        continue;
      int64_t o = checkedOffset(ptr, size, po[j], j, "load");
      if constexpr (std::is_same_v<T, uint8_t>)
        dst[j] = base[o] != 0 ? 1 : 0;
      else
        dst[j] = static_cast<int64_t>(base[o]);
    }
  });
  return makeI(s, std::move(out));
}

void Runner::execStore(tile::StoreOp op) {
  storeElements(get(op.getPtr()), intOperand(op, 1), get(op.getValue()),
                op.getMask() ? &get(op.getMask()) : nullptr);
}

void Runner::storeElements(const RuntimeValue &ptr, const RuntimeValue &offs,
                           const RuntimeValue &val, const RuntimeValue *mask) {
  if (ptr.elem != Elem::Ptr || ptr.ptrArg < 0)
    fail("store to a non-pointer value");
  size_t n = offs.size();
  size_t valDiv = repeatOf(val.size(), n);
  size_t maskDiv = mask ? repeatOf(mask->size(), n) : 1;
  const InterpBuffer &buf = bufferOf(ptr);
  const int64_t *po = offs.i->data();
  const int64_t *pm = mask ? mask->i->data() : nullptr;
  DType dt = buf.dtype;
  const int64_t size = buf.numElements;
  if (isFloat(dt) != bool(val.f))
    fail(std::string("cannot store ") + elemName(val.elem) +
         " values into a buffer of " + dtypeName(dt));
  withBufferType(dt, [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    T *base = static_cast<T *>(buf.data);
    for (size_t j = 0; j < n; ++j) {
      if (pm && !pm[j / maskDiv])
        continue;
      int64_t o = checkedOffset(ptr, size, po[j], j, "store");
      if constexpr (std::is_same_v<T, uint16_t>) {
        float x = (*val.f)[j / valDiv];
        base[o] = dt == DType::BF16 ? floatToBf16(x) : floatToHalf(x);
      } else if constexpr (std::is_same_v<T, float>) {
        base[o] = (*val.f)[j / valDiv];
      } else if constexpr (std::is_same_v<T, uint8_t>) {
        base[o] = (*val.i)[j / valDiv] != 0 ? 1 : 0;
      } else {
        base[o] = static_cast<T>((*val.i)[j / valDiv]);
      }
    }
  });
}

void Runner::execReduce(tile::ReduceOp op) {
  const RuntimeValue &src = get(op.getSrc());
  Shape s = shapeOf(op.getType());
  size_t n = src.size();
  if (n == 0)
    fail("reduction of an empty tile");
  ReduceKind kind = op.getKind();
  if (src.f) {
    const float *x = src.f->data();
    float r;
    if (kind == ReduceKind::Sum) {
      // The GPU order: each of the P threads sums its K = n/P consecutive
      // elements, then a tree combines the partials (stride P/2, P/4, ...).
      size_t p = llvm::bit_floor(
          static_cast<uint64_t>(std::max<int64_t>(k.blockThreads, 1)));
      while (p > 1 && n % p != 0)
        p /= 2;
      // (Lanes outermost so that the P independent chains pipeline.)
      size_t kk = n / p;
      llvm::SmallVector<float, 256> partial(p);
      for (size_t t = 0; t < p; ++t)
        partial[t] = x[t * kk];
      for (size_t j = 1; j < kk; ++j)
        for (size_t t = 0; t < p; ++t)
          partial[t] += x[t * kk + j];
      for (size_t stride = p / 2; stride >= 1; stride /= 2)
        for (size_t t = 0; t < stride; ++t)
          partial[t] += partial[t + stride];
      r = partial[0];
    } else {
      r = x[0];
      for (size_t j = 1; j < n; ++j)
        r = combineF(kind, r, x[j]);
    }
    return set(op.getResult(),
               makeF(s, std::make_shared<FVec>(1, roundTo(r, s.elem))));
  }
  const int64_t *x = src.i->data();
  int64_t r = x[0];
  for (size_t j = 1; j < n; ++j)
    r = combineI(kind, r, x[j], s.elem);
  set(op.getResult(), intScalar(s.elem, r));
}

RuntimeValue Runner::reduceRows(const RuntimeValue &src, ReduceKind kind,
                                int64_t cols, Shape s) {
  if (src.f) { // in column order, as the GPU lowering
    auto out = std::make_shared<FVec>(s.n);
    for (int64_t r = 0; r < s.n; ++r) {
      float acc = (*src.f)[r * cols];
      for (int64_t j = 1; j < cols; ++j)
        acc = combineF(kind, acc, (*src.f)[r * cols + j]);
      (*out)[r] = acc;
    }
    return makeF(s, std::move(out));
  }
  auto out = std::make_shared<IVec>(s.n);
  for (int64_t r = 0; r < s.n; ++r) {
    int64_t acc = (*src.i)[r * cols];
    for (int64_t j = 1; j < cols; ++j)
      acc = combineI(kind, acc, (*src.i)[r * cols + j], s.elem);
    (*out)[r] = acc;
  }
  return makeI(s, std::move(out));
}

void Runner::execReduceRows(tile::ReduceRowsOp op) {
  set(op.getResult(), reduceRows(get(op.getSrc()), op.getKind(), op.getCols(),
                                 shapeOf(op.getType())));
}

RuntimeValue Runner::broadcastRows(const RuntimeValue &src, int64_t cols,
                                   Shape s) {
  if (src.f) {
    auto out = std::make_shared<FVec>(s.n);
    for (int64_t i = 0; i < s.n; ++i)
      (*out)[i] = (*src.f)[i / cols];
    return makeF(s, std::move(out));
  }
  auto out = std::make_shared<IVec>(s.n);
  for (int64_t i = 0; i < s.n; ++i)
    (*out)[i] = (*src.i)[i / cols];
  return makeI(s, std::move(out));
}

void Runner::execBroadcastRows(tile::BroadcastRowsOp op) {
  set(op.getResult(),
      broadcastRows(get(op.getSrc()), op.getCols(), shapeOf(op.getType())));
}

/// acc += a b for row-major a (M x K), b (K x N), acc (M x N): products
/// of bf16/f16 values are exact in f32; sums in k order (tile.dot).
void accumulateProduct(const FVec &a, const FVec &b, FVec &acc,
                       int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = acc[i * N + j];
      for (int64_t kk = 0; kk < K; ++kk)
        s += a[i * K + kk] * b[kk * N + j];
      acc[i * N + j] = s;
    }
}

void Runner::execDot(tile::DotOp op) {
  auto out = std::make_shared<FVec>(*get(op.getAcc()).f);
  accumulateProduct(*get(op.getA()).f, *get(op.getB()).f, *out, op.getM(),
                    op.getN(), op.getK());
  set(op.getResult(), makeF(shapeOf(op.getType()), std::move(out)));
}

template <typename DotLoop>
RuntimeValue Runner::dotLoop(DotLoop op, const RuntimeValue &acc) {
  auto scalar = [&](Value v) {
    return uniformInt(v, "a dot loop's view or K range");
  };
  // The R x C block at (r0, c0) of a view, zeros outside it (tile.load_block).
  auto block = [&](Value ptr, Value rows, Value cols, Value rs, Value cs,
                   int64_t r0, int64_t c0, int64_t R, int64_t C) {
    int64_t nr = scalar(rows), nc = scalar(cols), sr = scalar(rs),
            sc = scalar(cs);
    auto offs = std::make_shared<IVec>(R * C, 0);
    auto mask = std::make_shared<IVec>(R * C, 0);
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        int64_t r = r0 + i, c = c0 + j;
        if (r >= 0 && r < nr && c >= 0 && c < nc) {
          (*mask)[i * C + j] = 1;
          (*offs)[i * C + j] = r * sr + c * sc;
        }
      }
    RuntimeValue o = makeI({Elem::I64, true, R * C}, std::move(offs));
    RuntimeValue m = makeI({Elem::I1, true, R * C}, std::move(mask));
    return loadElements(get(ptr), o, &m, nullptr, {Elem::F32, true, R * C});
  };
  int64_t M = op.getM(), N = op.getN(), K = op.getK();
  int64_t kEnd = scalar(op.getKEnd()), aRow0 = scalar(op.getARow0()),
          bCol0 = scalar(op.getBCol0());
  auto out = std::make_shared<FVec>(*acc.f);
  for (int64_t kk = scalar(op.getKBegin()); kk < kEnd; kk += K) {
    RuntimeValue a = block(op.getA(), op.getARows(), op.getACols(),
                           op.getARowStride(), op.getAColStride(), aRow0, kk,
                           M, K);
    RuntimeValue b = block(op.getB(), op.getBRows(), op.getBCols(),
                           op.getBRowStride(), op.getBColStride(), kk, bCol0,
                           K, N);
    accumulateProduct(*a.f, *b.f, *out, M, N, K);
  }
  return makeF({Elem::F32, true, M * N}, std::move(out));
}
template RuntimeValue Runner::dotLoop(tile::DotLoopOp, const RuntimeValue &);
template RuntimeValue Runner::dotLoop(simt::DotLoopOp, const RuntimeValue &);

void Runner::execDotLoop(tile::DotLoopOp op) {
  set(op.getResult(), dotLoop(op, get(op.getAcc())));
}

void Runner::execClusterReduce(tile::ClusterReduceOp op) {
  std::vector<ClusterExchange::Scalar> mine;
  for (Value src : op.getSrcs()) {
    const char *what = "a tile.cluster_reduce operand";
    mine.push_back(get(src).f
                       ? ClusterExchange::Scalar{uniformFloat(src, what), 0}
                       : ClusterExchange::Scalar{0, uniformInt(src, what)});
  }
  if (!cluster) { // a cluster of one program
    for (auto [src, res] : llvm::zip(op.getSrcs(), op.getResults()))
      set(res, get(src));
    return;
  }
  auto all = cluster->exchange(pid[0] % k.clusterSize, op, std::move(mine));
  ReduceKind kind = op.getKind();
  for (auto [i, res] : llvm::enumerate(op.getResults())) {
    Shape s = shapeOf(res.getType());
    if (s.elem == Elem::F32) {
      float r = all[0][i].f;
      for (size_t c = 1; c < all.size(); ++c)
        r = combineF(kind, r, all[c][i].f);
      set(res, spread(makeF(s, std::make_shared<FVec>(1, r))));
      continue;
    }
    int64_t r = all[0][i].i;
    for (size_t c = 1; c < all.size(); ++c)
      r = combineI(kind, r, all[c][i].i, s.elem);
    set(res, spread(intScalar(s.elem, r)));
  }
}

void Runner::execFor(scf::ForOp op) {
  Elem ivElem = intOperand(op, 0).elem;
  bool isUnsigned = op.getUnsignedCmp();
  int64_t lb = uniformInt(op.getLowerBound(), "scf.for's lower bound"),
          ub = uniformInt(op.getUpperBound(), "scf.for's upper bound"),
          step = uniformInt(op.getStep(), "scf.for's step");
  if (isUnsigned ? zext(step, ivElem) == 0 : step <= 0)
    fail("scf.for step must be positive, got " + std::to_string(step));
  llvm::SmallVector<RuntimeValue, 4> iter;
  for (Value v : op.getInitArgs())
    iter.push_back(get(v));
  Block &body = *op.getBody();
  Value iv = op.getInductionVar();
  auto inRange = [&](int64_t i) {
    return isUnsigned ? zext(i, ivElem) < zext(ub, ivElem) : i < ub;
  };
  for (int64_t i = lb; inRange(i);) {
    set(iv, spread(intScalar(ivElem, i)));
    for (auto [arg, v] : llvm::zip(op.getRegionIterArgs(), iter))
      set(arg, v);
    Operation *term = runBlock(body);
    for (auto [j, v] : llvm::enumerate(term->getOperands()))
      iter[j] = get(v);
    // The next value in the loop's width; leave when it passes the bound.
    int64_t next;
    if (isUnsigned) {
      uint64_t un = zext(i, ivElem) + zext(step, ivElem);
      if (un < zext(i, ivElem) ||
          (ivElem != Elem::I64 && un > zext(-1, ivElem)))
        break;
      next = normalize(un, ivElem);
    } else {
      if (__builtin_add_overflow(i, step, &next) ||
          next != normalize(uint64_t(next), ivElem))
        break;
    }
    i = next;
  }
  cur = op;
  for (auto [res, v] : llvm::zip(op.getResults(), iter))
    set(res, v);
}

void Runner::execIf(scf::IfOp op) {
  bool cond = uniformInt(op.getCondition(), "scf.if's condition") != 0;
  Region &region = cond ? op.getThenRegion() : op.getElseRegion();
  if (region.empty()) {
    if (op.getNumResults() != 0)
      fail("scf.if with results has no else region");
    return;
  }
  auto results = runRegion(region, {});
  cur = op;
  for (auto [res, v] : llvm::zip(op.getResults(), results))
    set(res, std::move(v));
}

void Runner::execWhile(scf::WhileOp op) {
  llvm::SmallVector<RuntimeValue, 4> args;
  for (Value v : op.getInits())
    args.push_back(get(v));
  while (true) {
    Operation *term = nullptr;
    auto carried = runRegion(op.getBefore(), args, &term);
    auto condOp = dyn_cast<scf::ConditionOp>(term);
    if (!condOp || carried.empty())
      fail("scf.while: malformed before region");
    bool cond =
        uniformInt(condOp.getCondition(), "scf.while's condition") != 0;
    carried.erase(carried.begin());
    if (!cond) {
      cur = op;
      for (auto [res, v] : llvm::zip(op.getResults(), carried))
        set(res, std::move(v));
      return;
    }
    args = runRegion(op.getAfter(), carried);
  }
}


} // namespace interp
} // namespace tilejit
