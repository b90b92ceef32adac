//===- DSL.cpp - the C++ DSL records tile-dialect IR ----------------------===//
//
// Values are mlir::Value handles (their opaque pointers) owned by the
// builder's module. Vars live in a list on the builder: when a loop or an if is
// built, every live Var is threaded through it as an iter_arg / result (the
// ones a body never assigns are removed again by canonicalization).
//
//===----------------------------------------------------------------------===//
#include "ir/DSLImpl.h"

namespace tilejit {
namespace dsl {

int64_t Config::get(const std::string &name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw Error("compile-time parameter '" + name +
                "' is not set (have: " + str() + ")");
  return it->second;
}

std::string Config::str() const {
  std::ostringstream os;
  for (auto &[k, v] : params)
    os << k << "=" << v << ",";
  os << "dtype=" << dtypeName(dtype);
  return os.str();
}

//===----------------------------------------------------------------------===//
// KernelBuilder
//===----------------------------------------------------------------------===//

KernelBuilder::KernelBuilder(const std::string &kernelName,
                             const Config &config)
    : impl_(std::make_unique<Impl>(kernelName, config, makeTilejitContext())) {
  auto &k = *impl_;
  k.module = mlir::ModuleOp::create(k.loc);
  k.b.setInsertionPointToEnd(k.module->getBody());
  k.func = mlir::func::FuncOp::create(k.b, k.loc, kernelName,
                                      k.b.getFunctionType({}, {}));
  mlir::Block *entry = k.func.addEntryBlock();
  k.b.setInsertionPointToEnd(entry);
  auto ret = mlir::func::ReturnOp::create(k.b, k.loc);
  k.b.setInsertionPoint(ret);

  int64_t warps =
      config.params.count("num_warps") ? config.get("num_warps") : 4;
  llvm::SmallVector<mlir::NamedAttribute> constexprs;
  for (auto &[name, v] : config.params)
    constexprs.push_back(k.b.getNamedAttr(name, k.b.getI64IntegerAttr(v)));
  k.func->setAttr(attr::kKernel, k.b.getUnitAttr());
  k.func->setAttr(attr::kNumWarps, k.b.getI64IntegerAttr(warps));
  k.func->setAttr(attr::kClusterSize, k.b.getI64IntegerAttr(clusterSize()));
  // The row schedules the compiler applies (compiler/TileSplitRows.cpp,
  // TileKeepRows.cpp), chosen like any parameter.
  auto param = [&](const char *name) {
    auto it = config.params.find(name);
    return it == config.params.end() ? int64_t(0) : it->second;
  };
  if (int64_t split = param("SPLIT_ROWS"); split > 1) {
    if (clusterSize() > 1)
      throw Error(kernelName + ": SPLIT_ROWS and CLUSTER_SIZE both ask for "
                               "a cluster; a kernel takes one of them");
    if (split > 8)
      throw Error(kernelName + ": SPLIT_ROWS = " + std::to_string(split) +
                  " is more than the 8 programs of a portable cluster");
    k.func->setAttr(attr::kClusterSize, k.b.getI64IntegerAttr(split));
    k.func->setAttr(attr::kSplitRows, k.b.getI64IntegerAttr(split));
  }
  if (param("KEEP_ROW"))
    k.func->setAttr(attr::kKeepRow, k.b.getI64IntegerAttr(1));
  if (param("UNSWITCH"))
    k.func->setAttr(attr::kUnswitch, k.b.getI64IntegerAttr(1));
  if (param("FUSE_WALKS"))
    k.func->setAttr(attr::kFuseWalks, k.b.getI64IntegerAttr(1));
  if (param("PEEL_TAIL"))
    k.func->setAttr(attr::kPeelTail, k.b.getI64IntegerAttr(1));
  if (param("LOAD_AHEAD"))
    k.func->setAttr(attr::kLoadAhead, k.b.getI64IntegerAttr(1));
  if (int64_t ahead = param("KEEP_COPY_AHEAD"); ahead != 0) {
    if (ahead < 1 || ahead > 7)
      throw Error(kernelName + ": KEEP_COPY_AHEAD = " + std::to_string(ahead) +
                  " is not 0 (off) or 1 to 7 (the copy groups in flight)");
    k.func->setAttr(attr::kCopyAhead, k.b.getI64IntegerAttr(ahead));
  }
  if (config.params.count("DOT_STAGES")) {
    int64_t stages = param("DOT_STAGES");
    if (stages < 2 || stages > 8)
      throw Error(kernelName + ": DOT_STAGES = " + std::to_string(stages) +
                  " is not 2 to 8 (the blocks in flight in a dot loop)");
    k.func->setAttr(attr::kDotStages, k.b.getI64IntegerAttr(stages));
  }
  if (param("DOT_SPECIALIZE"))
    k.func->setAttr(attr::kDotSpecialize, k.b.getUnitAttr());
  if (param("RESIDENT"))
    k.func->setAttr(attr::kResidentRequest, k.b.getUnitAttr());
  if (int64_t programs = param("PROGRAMS_PER_SM"); programs != 0) {
    if (programs < 1 || programs > 32)
      throw Error(kernelName + ": PROGRAMS_PER_SM = " +
                  std::to_string(programs) +
                  " is not 0 (the compiler's choice) or 1 to 32");
    k.func->setAttr(attr::kProgramsPerSm, k.b.getI64IntegerAttr(programs));
  }
  if (int64_t extent = param("ROW_EXTENT"); extent > 0)
    k.func->setAttr(attr::kRowExtent, k.b.getI64IntegerAttr(extent));
  if (config.params.count("min_programs_per_sm")) {
    int64_t programs = config.get("min_programs_per_sm");
    if (programs < 0)
      throw Error(kernelName +
                  ": min_programs_per_sm must be 0 (no minimum) "
                  "or more, not " +
                  std::to_string(programs));
    k.func->setAttr(attr::kMinProgramsPerSm, k.b.getI64IntegerAttr(programs));
  }
  k.func->setAttr(attr::kConstexprs, k.b.getDictionaryAttr(constexprs));
}

KernelBuilder::~KernelBuilder() = default;

const std::string &KernelBuilder::name() const { return impl_->name; }
const Config &KernelBuilder::config() const { return impl_->config; }

int64_t KernelBuilder::param(const std::string &name) const {
  auto it = impl_->config.params.find(name);
  if (it == impl_->config.params.end())
    impl_->fail("compile-time parameter '" + name + "' is not set");
  return it->second;
}

Value KernelBuilder::paramValue(const std::string &name, DType type,
                                SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  param(name);
  if (type != DType::I32 && type != DType::I64)
    k.fail("paramValue('" + name + "') must be i32 or i64");
  return k.wrap(
      this, tile::ConstexprOp::create(k.b, k.loc, k.elementType(type), name));
}

static Value addArgument(KernelBuilder &kb, Type t, const std::string &name) {
  auto &k = kb.impl();
  k.checkOpen();
  unsigned index = k.func.getNumArguments();
  if (failed(k.func.insertArgument(index, t, {}, k.loc)))
    k.fail("cannot add argument");
  k.func.setArgAttr(index, attr::kArgName, k.b.getStringAttr(name));
  return k.wrap(&kb, k.func.getArgument(index));
}

Value KernelBuilder::pointerArg(const std::string &name, DType elementType) {
  if (elementType == DType::I1)
    impl_->fail("pointer argument '" + name + "' to i1 is not supported");
  return addArgument(
      *this,
      tile::PtrType::get(impl_->ctx.get(), impl_->elementType(elementType)),
      name);
}

Value KernelBuilder::aliasedPointerArg(const std::string &name,
                                       DType elementType) {
  Value p = pointerArg(name, elementType);
  auto &k = *impl_;
  k.func.setArgAttr(k.func.getNumArguments() - 1, attr::kMayAlias,
                    mlir::UnitAttr::get(k.ctx.get()));
  return p;
}

Value KernelBuilder::scalarArg(const std::string &name, DType type) {
  if (type != DType::I32 && type != DType::I64 && type != DType::F32)
    impl_->fail("scalar argument '" + name + "' must be i32, i64 or f32");
  return addArgument(*this, impl_->elementType(type), name);
}

Value KernelBuilder::programId(int axis, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (axis < 0 || axis > 2)
    k.fail("programId axis must be 0, 1 or 2");
  return k.wrap(this,
                tile::ProgramIdOp::create(k.b, k.loc, k.b.getI32Type(), axis));
}

std::vector<Value> KernelBuilder::clusterReduce(ClusterOp combine,
                                                const std::vector<Value> &xs,
                                                SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (xs.empty())
    k.fail("clusterReduce of no values");
  llvm::SmallVector<MValue> srcs;
  for (const Value &x : xs) {
    MValue v = k.use(x);
    Type t = v.getType();
    if (isTileType(t) || mlir::isa<tile::PtrType>(t))
      k.fail("clusterReduce combines scalars; reduce a tile with .sum()/.max() "
             "first");
    if (t.isFloat() && !t.isF32())
      v = castTo(k, v, k.b.getF32Type());
    if (!srcs.empty() && v.getType() != srcs.front().getType())
      k.fail("clusterReduce operands must share one type, got " +
             typeStr(srcs.front().getType()) + " and " + typeStr(v.getType()));
    srcs.push_back(v);
  }
  ReduceKind kind = combine == ClusterOp::Sum   ? ReduceKind::Sum
                    : combine == ClusterOp::Max ? ReduceKind::Max
                                                : ReduceKind::Min;
  llvm::SmallVector<Type> types(srcs.size(), srcs.front().getType());
  auto op = tile::ClusterReduceOp::create(
      k.b, k.loc, types, ReduceKindAttr::get(k.ctx.get(), kind), srcs);
  std::vector<Value> out;
  for (MValue r : op.getResults())
    out.push_back(k.wrap(this, r));
  return out;
}

std::pair<Value, Value> KernelBuilder::softmaxFold(Value m, Value d, Value x,
                                                   SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue vm = k.use(m), vd = k.use(d), vx = k.use(x);
  if (!isTileType(vm.getType()) || vm.getType() != vd.getType() ||
      vm.getType() != vx.getType() ||
      !mlir::cast<mlir::RankedTensorType>(vm.getType()).getElementType().isF32())
    k.fail("softmaxFold needs three f32 tiles of one size, got " +
           typeStr(vm.getType()) + ", " + typeStr(vd.getType()) + " and " +
           typeStr(vx.getType()));
  auto op = tile::SoftmaxFoldOp::create(k.b, k.loc, vm.getType(), vm.getType(),
                                        vm, vd, vx);
  return {k.wrap(this, op.getMNext()), k.wrap(this, op.getDNext())};
}

std::pair<Value, Value> KernelBuilder::softmaxTotal(Value m, Value d,
                                                    SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue vm = k.use(m), vd = k.use(d);
  if (!isTileType(vm.getType()) || vm.getType() != vd.getType() ||
      !mlir::cast<mlir::RankedTensorType>(vm.getType()).getElementType().isF32())
    k.fail("softmaxTotal needs two f32 tiles of one size, got " +
           typeStr(vm.getType()) + " and " + typeStr(vd.getType()));
  auto f32 = k.b.getF32Type();
  auto op = tile::SoftmaxTotalOp::create(k.b, k.loc, f32, f32, vm, vd);
  return {k.wrap(this, op.getMax()), k.wrap(this, op.getSum())};
}

Value KernelBuilder::dot(Value a, Value b, Value acc, int64_t M, int64_t N,
                         int64_t K, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue va = k.use(a), vb = k.use(b), vc = k.use(acc);
  auto sizeOk = [&](MValue v, int64_t n) {
    return isTileType(v.getType()) && sizeOf(v.getType()) == n;
  };
  if (!sizeOk(va, M * K) || !sizeOk(vb, K * N) || !sizeOk(vc, M * N))
    k.fail("dot(a, b, acc, M = " + std::to_string(M) +
           ", N = " + std::to_string(N) + ", K = " + std::to_string(K) +
           ") needs tiles of M*K, K*N and M*N elements, got " +
           typeStr(va.getType()) + ", " + typeStr(vb.getType()) + ", " +
           typeStr(vc.getType()));
  Type ea = elementOf(va.getType()), eb = elementOf(vb.getType());
  if (ea != eb || !(ea.isBF16() || ea.isF16()))
    k.fail("dot needs a and b both bf16 or both f16, got " + typeStr(ea) +
           " and " + typeStr(eb));
  if (!elementOf(vc.getType()).isF32())
    k.fail("dot accumulates into an f32 tile, got " + typeStr(vc.getType()));
  auto op = tile::DotOp::create(
      k.b, k.loc, vc.getType(), va, vb, vc, k.b.getI64IntegerAttr(M),
      k.b.getI64IntegerAttr(N), k.b.getI64IntegerAttr(K));
  if (mlir::failed(mlir::verify(op)))
    k.fail("dot(M = " + std::to_string(M) + ", N = " + std::to_string(N) +
           ", K = " + std::to_string(K) + "): " +
           "M and K must be multiples of 16, N of 8");
  return k.wrap(this, op);
}

Value KernelBuilder::loadBlock(const TensorDescriptor &view, Value row0,
                              Value col0, int64_t R, int64_t C,
                              SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue p = k.use(view.ptr);
  if (!mlir::isa<tile::PtrType>(p.getType()))
    k.fail("loadBlock needs a pointer in its TensorDescriptor");
  auto index = [&](Value v, const char *what) {
    MValue x = k.use(v);
    if (isTileType(x.getType()) || !elementOf(x.getType()).isInteger() ||
        elementOf(x.getType()).getIntOrFloatBitWidth() < 32)
      k.fail(std::string("loadBlock: ") + what +
             " must be an i32 or i64 scalar, got " + typeStr(x.getType()));
    return castTo(k, x, k.b.getI64Type());
  };
  const int64_t most = kMaxElementsPerThread * 1024; // 1024 threads at most
  if (R <= 0 || C <= 0 || R > most / C)
    k.fail("loadBlock: a block of " + std::to_string(R) + " x " +
           std::to_string(C) + " elements: rows and columns must be at "
           "least 1 and the block at most " + std::to_string(most) +
           " elements");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  auto type = mlir::RankedTensorType::get({R * C}, elem);
  auto op = tile::LoadBlockOp::create(
      k.b, k.loc, type, p, index(view.rows, "rows"), index(view.cols, "cols"),
      index(view.rowStride, "rowStride"), index(view.colStride, "colStride"),
      index(row0, "row0"), index(col0, "col0"), k.b.getI64IntegerAttr(R),
      k.b.getI64IntegerAttr(C));
  if (mlir::failed(mlir::verify(op)))
    k.fail("loadBlock: blocks hold i32, i64, bf16, f16 or f32 elements, "
           "not " + typeStr(elem));
  return k.wrap(this, op);
}

Value KernelBuilder::broadcastRows(Value v, int64_t cols, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue x = k.use(v);
  if (!isTileType(x.getType()) || cols <= 0)
    k.fail("broadcastRows needs a tile and cols > 0");
  auto type = mlir::RankedTensorType::get({sizeOf(x.getType()) * cols},
                                          elementOf(x.getType()));
  auto r = tile::BroadcastRowsOp::create(k.b, k.loc, type, x,
                                         k.b.getI64IntegerAttr(cols));
  if (mlir::failed(mlir::verify(r)))
    k.fail("broadcastRows(" + std::to_string(cols) +
           "): the row values must fit 32 KiB of shared memory");
  return k.wrap(this, r);
}

void KernelBuilder::assumeAlignedVectors() {
  auto &k = *impl_;
  k.checkOpen();
  k.func->setAttr(attr::kAlignedVectors, mlir::UnitAttr::get(k.ctx.get()));
}

int64_t KernelBuilder::clusterSize() const {
  auto it = impl_->config.params.find("CLUSTER_SIZE");
  return it == impl_->config.params.end() ? 1 : it->second;
}

int64_t KernelBuilder::threadGroup(int64_t tileSize,
                                   DType narrowestAccessed) const {
  auto &k = *impl_;
  int64_t threads =
      32 * k.func->getAttrOfType<mlir::IntegerAttr>(attr::kNumWarps).getInt();
  if (tileSize <= 0 || tileSize % threads != 0)
    k.fail("threadGroup: a tile of " + std::to_string(tileSize) +
           " elements is not a multiple of the " + std::to_string(threads) +
           " threads");
  return defaultLayoutGroup(16 / int64_t(dtypeSize(narrowestAccessed)),
                            tileSize / threads);
}

Value KernelBuilder::sharedArray(int64_t n, DType type, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  if (type == DType::I1)
    k.fail("sharedArray of i1 is not supported");
  if (n <= 0)
    k.fail("sharedArray(" + std::to_string(n) + ") needs a positive size");
  if (k.b.getInsertionBlock()->getParentOp() != k.func.getOperation())
    k.fail("sharedArray must be called outside loops and branches (the "
           "array lives for the whole program)");
  auto total = k.func->getAttrOfType<mlir::IntegerAttr>(attr::kSharedBytes);
  int64_t offset = total ? total.getInt() : 0;
  int64_t bytes = n * int64_t(dtypeSize(type));
  int64_t end = offset + (bytes + 15) / 16 * 16;
  if (end > kMaxSharedArrayBytes)
    k.fail("sharedArray(" + std::to_string(n) + " x " + dtypeName(type) +
           "): the kernel's shared arrays would take " + std::to_string(end) +
           " bytes, more than the " + std::to_string(kMaxSharedArrayBytes) +
           " a block may have");
  k.func->setAttr(attr::kSharedBytes, k.b.getI64IntegerAttr(end));
  auto ptrType = tile::PtrType::get(k.ctx.get(), k.elementType(type));
  return k.wrap(this,
                tile::SharedAllocOp::create(k.b, k.loc, ptrType, n, offset));
}

void KernelBuilder::barrier(SourceLoc loc) {
  impl_->statement<tile::BarrierOp>(loc);
}

Value KernelBuilder::numPrograms(int axis, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (axis < 0 || axis > 2)
    k.fail("numPrograms axis must be 0, 1 or 2");
  return k.wrap(
      this, tile::NumProgramsOp::create(k.b, k.loc, k.b.getI32Type(), axis));
}

/// Tiles live in registers, n / threads elements per thread: a size that
/// cannot fit is an error here, not a compile that runs for minutes.
static void checkTileSize(KernelBuilder::Impl &k, int64_t n, const char *what) {
  int64_t threads =
      32 * k.func->getAttrOfType<mlir::IntegerAttr>(attr::kNumWarps).getInt();
  if (n <= 0)
    k.fail(std::string(what) + "(" + std::to_string(n) +
           ") needs a positive size (is a BLOCK_SIZE-like parameter 0?)");
  if (n > kMaxElementsPerThread * threads)
    k.fail(std::string(what) + "(" + std::to_string(n) +
           "): " + std::to_string(ceilDiv(n, threads)) +
           " elements per thread over " + std::to_string(threads) +
           " threads; at most " + std::to_string(kMaxElementsPerThread) +
           " fit in registers (a smaller tile, or more num_warps)");
}

Value KernelBuilder::arange(int64_t n, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  checkTileSize(k, n, "arange");
  auto t = mlir::RankedTensorType::get({n}, k.b.getI32Type());
  return k.wrap(this, tile::ArangeOp::create(k.b, k.loc, t));
}

Value KernelBuilder::constant(double v, DType type, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  return k.wrap(this, scalarConstant(k, v, k.elementType(type)));
}

Value KernelBuilder::full(int64_t n, Value v, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue s = k.use(v);
  if (isTileType(s.getType()))
    k.fail("full() takes a scalar");
  checkTileSize(k, n, "full");
  return k.wrap(this, splatTo(k, s, n));
}

/// Checks a pointer and i32/i64 offsets for load/store.
static std::pair<MValue, MValue> access(KernelBuilder::Impl &k, Value ptr,
                                        Value offsets, const char *op) {
  MValue p = k.use(ptr), off = k.use(offsets);
  if (!mlir::isa<tile::PtrType>(p.getType()))
    k.fail(std::string(op) + "() needs a pointer, got " + typeStr(p.getType()));
  Type e = elementOf(off.getType());
  if (!e.isInteger(32) && !e.isInteger(64))
    k.fail(std::string(op) + "() offsets must be i32 or i64, got " +
           typeStr(off.getType()));
  return {p, off};
}

static MValue maskFor(KernelBuilder::Impl &k, Value mask, MValue offsets,
                      const char *op) {
  MValue m = k.use(mask);
  if (!elementOf(m.getType()).isInteger(1))
    k.fail(std::string(op) + "() mask must be i1 (a comparison), got " +
           typeStr(m.getType()));
  if (isTileType(offsets.getType()))
    m = splatTo(k, m, sizeOf(offsets.getType()));
  if (sizeOf(m.getType()) != sizeOf(offsets.getType()) ||
      isTileType(m.getType()) != isTileType(offsets.getType()))
    k.fail(std::string(op) + "() mask and offsets have different shapes");
  return m;
}

Value KernelBuilder::load(Value ptr, Value offsets, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offsets, "load");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  auto r = tile::LoadOp::create(k.b, k.loc, withElement(off.getType(), elem), p,
                                off, MValue(), MValue());
  return k.wrap(this, r);
}

Value KernelBuilder::load(Value ptr, Value offsets, Mask mask, double other,
                          SourceLoc loc) {
  if (!mask)
    return load(ptr, offsets, loc);
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offsets, "load");
  MValue m = maskFor(k, *mask, off, "load");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  MValue o = scalarConstant(k, other, elem);
  auto r = tile::LoadOp::create(k.b, k.loc, withElement(off.getType(), elem), p,
                                off, m, o);
  return k.wrap(this, r);
}

static void storeImpl(KernelBuilder &kb, Value ptr, Value offsets, Value value,
                      const Value *mask) {
  auto &k = kb.impl();
  auto [p, off] = access(k, ptr, offsets, "store");
  MValue v = k.use(value);
  if (isTileType(v.getType()) && !isTileType(off.getType()))
    k.fail("store() of a tile needs tile offsets");
  if (isTileType(v.getType()) && sizeOf(v.getType()) != sizeOf(off.getType()))
    k.fail("store() value and offsets have different tile sizes");
  v = castTo(k, v, mlir::cast<tile::PtrType>(p.getType()).getElementType());
  if (isTileType(off.getType()))
    v = splatTo(k, v, sizeOf(off.getType()));
  MValue m = mask ? maskFor(k, *mask, off, "store") : MValue();
  tile::StoreOp::create(k.b, k.loc, p, off, v, m);
}

void KernelBuilder::store(Value ptr, Value offsets, Value value,
                          SourceLoc loc) {
  impl_->at(loc);
  storeImpl(*this, ptr, offsets, value, nullptr);
}

void KernelBuilder::store(Value ptr, Value offsets, Value value, Mask mask,
                          SourceLoc loc) {
  impl_->at(loc);
  storeImpl(*this, ptr, offsets, value, mask ? &*mask : nullptr);
}

void KernelBuilder::copyAsync(Value dst, Value dstOffsets, Value src,
                              Value srcOffsets, Mask mask, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [d, dOff] = access(k, dst, dstOffsets, "copyAsync");
  auto [s, sOff] = access(k, src, srcOffsets, "copyAsync");
  if (d.getType() != s.getType())
    k.fail("copyAsync() between pointers of different element types (" +
           typeStr(d.getType()) + " and " + typeStr(s.getType()) + ")");
  if (!isTileType(dOff.getType()) || !isTileType(sOff.getType()))
    k.fail("copyAsync() copies tiles: both offsets must be tiles");
  if (sizeOf(dOff.getType()) != sizeOf(sOff.getType()))
    k.fail("copyAsync() offsets have different tile sizes");
  MValue m = mask ? maskFor(k, *mask, sOff, "copyAsync") : MValue();
  tile::CopyAsyncOp::create(k.b, k.loc, d, dOff, s, sOff, m);
}

void KernelBuilder::prefetchL2(Value ptr, Value offset, Value count,
                               SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offset, "prefetchL2");
  MValue n = k.use(count);
  if (isTileType(off.getType()) || isTileType(n.getType()))
    k.fail("prefetchL2() takes a scalar offset and count, not tiles");
  if (!n.getType().isInteger(32) && !n.getType().isInteger(64))
    k.fail("prefetchL2() count must be i32 or i64, got " +
           typeStr(n.getType()));
  if (pointerRoot(p).getDefiningOp<tile::SharedAllocOp>())
    k.fail("prefetchL2() fetches global memory, not a shared array");
  tile::PrefetchL2Op::create(k.b, k.loc, p, off, n);
}

void KernelBuilder::commitCopies(SourceLoc loc) {
  impl_->statement<tile::CopyCommitOp>(loc);
}

static void createCopyWait(KernelBuilder::Impl &k, int64_t pending,
                           bool laneOnly) {
  k.checkOpen();
  if (pending < 0 || pending > 7)
    k.fail(std::string(laneOnly ? "waitOwnCopies(" : "waitCopies(") +
           std::to_string(pending) + "): pending must be 0 to 7");
  tile::CopyWaitOp::create(k.b, k.loc, pending, laneOnly);
}

void KernelBuilder::waitCopies(int64_t pending, SourceLoc loc) {
  impl_->at(loc);
  createCopyWait(*impl_, pending, /*laneOnly=*/false);
}

void KernelBuilder::waitOwnCopies(int64_t pending, SourceLoc loc) {
  impl_->at(loc);
  createCopyWait(*impl_, pending, /*laneOnly=*/true);
}

/// Current values of `vars`, as the operands of a yield.
static llvm::SmallVector<MValue> currentValues(KernelBuilder::Impl &k,
                                               llvm::ArrayRef<Var *> vars,
                                               llvm::ArrayRef<Type> types) {
  llvm::SmallVector<MValue> values;
  for (auto [var, type] : llvm::zip(vars, types)) {
    MValue v = k.use(*var);
    if (v.getType() != type)
      k.fail("a Var changed type inside a loop or if body (" + typeStr(type) +
             " -> " + typeStr(v.getType()) + ")");
    values.push_back(v);
  }
  return values;
}

/// The live Vars on entry to a loop or if body, with their values and types
/// there: the state the region carries.
namespace {
struct Carried {
  std::vector<Var *> vars;
  llvm::SmallVector<MValue> values;
  llvm::SmallVector<Type> types;
};
} // namespace
static Carried carriedState(KernelBuilder::Impl &k) {
  Carried c{k.liveVars, {}, {}};
  for (Var *v : c.vars) {
    c.values.push_back(k.use(*v));
    c.types.push_back(c.values.back().getType());
  }
  return c;
}

void KernelBuilder::forRange(Value lo, Value hi, Value step,
                             const std::function<void(Value)> &body,
                             SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue l = k.use(lo), h = k.use(hi), s = k.use(step);
  for (MValue v : {l, h, s})
    if (isTileType(v.getType()) || !v.getType().isInteger() ||
        v.getType().isInteger(1))
      k.fail("forRange bounds and step must be i32/i64 scalars");
  Type t = commonElement(k, commonElement(k, l.getType(), h.getType(), "for"),
                         s.getType(), "for");
  l = castTo(k, l, t);
  h = castTo(k, h, t);
  s = castTo(k, s, t);

  auto [carried, inits, types] = carriedState(k);
  auto forOp = mlir::scf::ForOp::create(k.b, k.loc, l, h, s, inits);
  OpBuilder::InsertionGuard guard(k.b);
  mlir::Block *blk = forOp.getBody();
  if (!blk->empty())
    blk->back().erase(); // the default empty yield
  k.b.setInsertionPointToEnd(blk);
  for (auto [var, arg] : llvm::zip(carried, forOp.getRegionIterArgs()))
    *var = k.wrap(this, arg);
  body(k.wrap(this, forOp.getInductionVar()));
  auto yields = currentValues(k, carried, types);
  mlir::scf::YieldOp::create(k.b, k.loc, yields);
  for (auto [var, res] : llvm::zip(carried, forOp.getResults()))
    var->Value::operator=(k.wrap(this, res));
}

void KernelBuilder::forRange(int64_t lo, Value hi, int64_t step,
                             const std::function<void(Value)> &body,
                             SourceLoc loc) {
  impl_->at(loc);
  DType t = hi.dtype();
  forRange(constant(lo, t, loc), hi, constant(step, t, loc), body, loc);
}

void KernelBuilder::forTiles(
    Value lo, Value hi, int64_t n, int64_t unroll,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  walkTiles(lo, hi, n, unroll, /*backward=*/false, body, loc);
}

void KernelBuilder::forTilesBackward(
    Value lo, Value hi, int64_t n, int64_t unroll,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  walkTiles(lo, hi, n, unroll, /*backward=*/true, body, loc);
}

void KernelBuilder::walkTiles(
    Value lo, Value hi, int64_t n, int64_t unroll, bool backward,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  impl_->at(loc);
  if (n < 1 || unroll < 1 || unroll > 16)
    impl_->fail("forTiles needs a tile width of at least 1 and an unroll in "
                "1..16 (got " +
                std::to_string(n) + " and " + std::to_string(unroll) + ")");
  if (lo.isTile() || hi.isTile() || lo.dtype() != DType::I32 ||
      hi.dtype() != DType::I32)
    impl_->fail("forTiles bounds must be i32 scalars (offsets are i32 tiles)");
  // The whole steps, then the whole tiles left one at a time, then the
  // partial tile: a tail of 1.2 tiles costs one unmasked and one masked
  // tile where a masked step of `unroll` tiles cost about twice `unroll`
  // unmasked ones (in SASS: 528 instructions for a masked step of 2 tiles
  // against 276 for a whole one).
  // The ends are lo for an empty or reversed range.
  Value span = max(hi - lo, constant(0, hi.dtype(), loc));
  auto wholeEnd = [&](int64_t width) {
    Value w = constant(double(width), hi.dtype(), loc);
    return lo + span / w * w;
  };
  Value stepsEnd = wholeEnd(n * unroll);
  Value tilesEnd = unroll > 1 ? wholeEnd(n) : stepsEnd;
  auto walk = [&](Value from, Value to, int64_t tiles, bool whole) {
    Value step = constant(double(n * tiles), hi.dtype(), loc);
    // Backward, step i of [from, to) becomes its mirror image.
    Value last = whole && backward ? to - step : Value();
    forRange(
        from, to, step,
        [&](Value i) {
          Value first = last.valid() ? last - (i - from) : i;
          std::vector<Value> offs;
          std::vector<Mask> masks;
          for (int64_t u = 0; u < tiles; ++u) {
            offs.push_back(first + double(u * n) + arange(n, loc));
            masks.push_back(whole ? std::nullopt : Mask(offs.back() < hi));
          }
          body(offs, masks);
        },
        loc);
  };
  walk(lo, stepsEnd, unroll, true);
  if (unroll > 1)
    walk(stepsEnd, tilesEnd, 1, true);
  walk(tilesEnd, hi, 1, false);
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &thenBody,
                           const std::function<void()> &elseBody,
                           SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue c = k.use(cond);
  if (isTileType(c.getType()) || !c.getType().isInteger(1))
    k.fail("ifThen needs a scalar i1 condition");
  Carried state = carriedState(k);
  const std::vector<Var *> &carried = state.vars;
  const llvm::SmallVector<MValue> &before = state.values;
  const llvm::SmallVector<Type> &types = state.types;
  auto ifOp = mlir::scf::IfOp::create(k.b, k.loc, types, c,
                                      /*addThenBlock=*/true,
                                      /*addElseBlock=*/true);
  auto buildBranch = [&](mlir::Block *blk, const std::function<void()> &fn) {
    OpBuilder::InsertionGuard guard(k.b);
    if (!blk->empty())
      blk->back().erase();
    k.b.setInsertionPointToEnd(blk);
    for (auto [var, v] : llvm::zip(carried, before))
      var->Value::operator=(k.wrap(this, v));
    if (fn)
      fn();
    mlir::scf::YieldOp::create(k.b, k.loc, currentValues(k, carried, types));
  };
  buildBranch(ifOp.thenBlock(), thenBody);
  buildBranch(ifOp.elseBlock(), elseBody);
  for (auto [var, res] : llvm::zip(carried, ifOp.getResults()))
    var->Value::operator=(k.wrap(this, res));
}

TileModule KernelBuilder::finish() {
  auto &k = *impl_;
  k.checkOpen();
  collectDiagnostics(*k.ctx, "kernel '" + k.name + "' failed verification",
                     [&] { return mlir::verify(*k.module); });
  k.finished = true;
  auto impl = std::make_shared<TileModule::Impl>();
  impl->context = k.ctx;
  impl->module = std::move(k.module);
  impl->kernelName = k.name;
  return TileModule(impl);
}

} // namespace dsl
} // namespace tilejit

