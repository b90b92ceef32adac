//===- EmitSimt.cpp - vector and simt ops as CUDA statements ----------------===//
//
// Per-thread vectors, thread and program ids, block and row reductions,
// masked and vectorized loads and stores, asynchronous copies, dot, dot
// loops and cluster combines: calls into the device helpers of
// codegen/cuda/*.cuh.
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelEmitter.h"

namespace tilejit {
namespace emit {

bool KernelEmitter::emitVector(Operation *op) {
  if (op->getName().getDialectNamespace() != "vector")
    return false;
  Value res = op->getResult(0);
  if (auto b = dyn_cast<vector::BroadcastOp>(op)) {
    Type st = b.getSource().getType();
    auto k = vecLen(res.getType(), op);
    auto sk = vecLen(st, op);
    if (sk && *sk != 1 && *sk != *k)
      fail(op, "unsupported broadcast shape");
    define(op, res, [&](const std::string &e) {
      return ref(b.getSource(), sk && *sk == 1 ? "0" : e, op);
    });
    return true;
  }
  if (op->getName().getStringRef() == "vector.splat") {
    define(op, res, [&](const std::string &) { return r(op, 0, ""); });
    return true;
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    Value src = red.getVector();
    Type et = elemType(src.getType());
    int64_t k = *vecLen(src.getType(), op);
    using K = vector::CombiningKind;
    K kind = red.getKind();
    bool isFloat = isa<FloatType>(et);
    if (isFloat)
      requireFloat(et, op);
    std::string ut = isFloat ? "" : "(" + unsignedType(et, op) + ")";
    auto combine = [&](const std::string &a0,
                       const std::string &b0) -> std::string {
      std::string a = isFloat ? toF32(a0, et) : a0;
      std::string b = isFloat ? toF32(b0, et) : b0;
      std::string c;
      switch (kind) {
      case K::ADD:
        c = a + " + " + b;
        break;
      case K::MUL:
        c = a + " * " + b;
        break;
      case K::MAXIMUMF:
        c = "tj_maximumf(" + a + ", " + b + ")";
        break;
      case K::MINIMUMF:
        c = "tj_minimumf(" + a + ", " + b + ")";
        break;
      case K::MAXNUMF:
        c = "fmaxf(" + a + ", " + b + ")";
        break;
      case K::MINNUMF:
        c = "fminf(" + a + ", " + b + ")";
        break;
      case K::MAXSI:
        c = a + " > " + b + " ? " + a + " : " + b;
        break;
      case K::MINSI:
        c = a + " < " + b + " ? " + a + " : " + b;
        break;
      case K::MAXUI:
        c = ut + a + " > " + ut + b + " ? " + a + " : " + b;
        break;
      case K::MINUI:
        c = ut + a + " < " + ut + b + " ? " + a + " : " + b;
        break;
      case K::AND:
        c = a + " & " + b;
        break;
      case K::OR:
        c = a + " | " + b;
        break;
      case K::XOR:
        c = a + " ^ " + b;
        break;
      }
      return isFloat ? fromF32(c, et) : c;
    };
    bool floatKind = kind == K::MAXIMUMF || kind == K::MINIMUMF ||
                     kind == K::MAXNUMF || kind == K::MINNUMF;
    bool bothKind = kind == K::ADD || kind == K::MUL;
    if (isFloat ? !(floatKind || bothKind) : floatKind)
      fail(op, "reduction kind does not fit the element type");
    if (et.isInteger(1) && bothKind)
      fail(op, "add/mul reductions of i1 are not supported");
    std::string n = bind(res);
    const std::string &s = name(src, op);
    std::string decl = declaration(res.getType(), n, op);
    int64_t first = 0;
    if (Value acc = red.getAcc()) {
      line(decl + " = " + name(acc, op) + ";");
    } else {
      std::string init = decl + " = " + s + "[0];";
      if (k > 1)
        line(init);
      else
        stmt(init);
      first = 1;
    }
    if (first < k) {
      if (k - first == 1) {
        std::string e = std::to_string(first);
        stmt(n + " = " + combine(n, s + "[" + e + "]") + ";");
      } else {
        line("#pragma unroll");
        line("for (int e = " + std::to_string(first) + "; e < " +
             std::to_string(k) + "; ++e)");
        ++indent;
        stmt(n + " = " + combine(n, s + "[e]") + ";");
        --indent;
      }
    }
    return true;
  }
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    auto pos = ex.getMixedPosition();
    if (pos.empty()) {
      declareCopy(op, res, name(ex.getSource(), op));
      return true;
    }
    if (pos.size() != 1)
      fail(op, "only 1-D extracts are supported");
    std::string idx;
    if (auto a = dyn_cast<Attribute>(pos[0])) {
      int64_t i = cast<IntegerAttr>(a).getInt();
      if (i < 0)
        fail(op, "poison extract position");
      idx = std::to_string(i);
    } else {
      idx = name(cast<Value>(pos[0]), op);
    }
    define(op, res, [&](const std::string &) {
      return name(ex.getSource(), op) + "[" + idx + "]";
    });
    return true;
  }
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    std::vector<std::string> elems;
    for (Value v : fe.getElements())
      elems.push_back(name(v, op));
    std::string n = bind(res);
    stmt(declaration(res.getType(), n, op) + " = {" + llvm::join(elems, ", ") +
         "};");
    return true;
  }
  if (isa<vector::StepOp>(op)) {
    std::string st = scalarType(elemType(res.getType()), op);
    define(op, res, [&](const std::string &e) {
      return "(" + st + ")" + (e.empty() ? "0" : e);
    });
    return true;
  }
  return false;
}

bool KernelEmitter::emitSimt(Operation *op) {
  if (isa<simt::ThreadIdOp>(op)) {
    define(op, op->getResult(0),
           [](const std::string &) { return "(int)threadIdx.x"; });
    return true;
  }
  auto axisName = [](uint32_t axis) {
    return axis == 0 ? "x" : axis == 1 ? "y" : "z";
  };
  // In a resident kernel, the program the loop over the grid is at.
  if (auto b = dyn_cast<simt::BlockIdOp>(op)) {
    define(op, b.getResult(), [&](const std::string &) {
      return std::string(resident ? "tj_pid_" : "(int)blockIdx.") +
             axisName(b.getAxis());
    });
    return true;
  }
  if (auto g = dyn_cast<simt::GridDimOp>(op)) {
    define(op, g.getResult(), [&](const std::string &) {
      return std::string(resident ? "tj_grid_" : "(int)gridDim.") +
             axisName(g.getAxis());
    });
    return true;
  }
  if (auto br = dyn_cast<simt::BlockReduceOp>(op)) {
    const char *fn = br.getKind() == ReduceKind::Sum   ? "tj_block_sum"
                     : br.getKind() == ReduceKind::Max ? "tj_block_max"
                                                       : "tj_block_min";
    define(op, br.getResult(), [&](const std::string &) {
      return std::string(fn) + "<" + std::to_string(threads) + ">(" +
             name(br.getSrc(), op) + ")";
    });
    return true;
  }
  // Each tile's group width (tile-assign-layout).
  auto groupOf = [&](Value v) {
    return std::to_string(
        layoutGroup(func, *vecLen(v.getType(), op) * threads));
  };
  // result = fn<R, C, P, matrix group, vector group[, combine]>(operand 0)
  // for the row ops, whose matrix is R x C and vector R.
  auto rowsCall = [&](const char *fn, int64_t cols, Value matrix, Value vector,
                      std::optional<ReduceKind> kind) {
    Value result = op->getResult(0);
    std::string n = bind(result);
    line(declaration(result.getType(), n, op) + ";");
    locate(op);
    stmt(std::string(fn) + "<" +
         std::to_string(*vecLen(vector.getType(), op) * threads) + ", " +
         std::to_string(cols) + ", " + std::to_string(threads) + ", " +
         groupOf(matrix) + ", " + groupOf(vector) +
         (kind ? std::string(", ") + combinerName(*kind) : std::string()) +
         ">(" + name(op->getOperand(0), op) + ", " + n + ");");
  };
  if (auto rr = dyn_cast<simt::ReduceRowsOp>(op)) {
    rowsCall("tj_reduce_rows", rr.getCols(), rr.getSrc(), rr.getResult(),
             rr.getKind());
    return true;
  }
  if (auto br = dyn_cast<simt::BroadcastRowsOp>(op)) {
    rowsCall("tj_broadcast_rows", br.getCols(), br.getResult(), br.getSrc(),
             std::nullopt);
    return true;
  }
  if (auto dot = dyn_cast<simt::DotOp>(op)) {
    std::string n = bind(dot.getResult());
    line(declaration(dot.getType(), n, op) + ";");
    locate(op);
    stmt("tj_dot<" + std::to_string(dot.getM()) + ", " +
         std::to_string(dot.getN()) + ", " + std::to_string(dot.getK()) + ", " +
         std::to_string(threads) + ", " + groupOf(dot.getA()) + ", " +
         groupOf(dot.getB()) + ", " + groupOf(dot.getResult()) + ">(" +
         name(dot.getA(), op) + ", " + name(dot.getB(), op) + ", " +
         name(dot.getAcc(), op) + ", " + n + ");");
    return true;
  }
  if (auto dl = dyn_cast<simt::DotLoopOp>(op)) {
    std::string n = bind(dl.getResult());
    line(declaration(dl.getType(), n, op) + ";");
    locate(op);
    // A view whose rows are contiguous (stride 1 down a column) is kept in
    // shared memory the other way round; any other view is copied
    // element by element at run time.
    auto rowsContiguous = [](Value rowStride, Value colStride) {
      return matchPattern(rowStride, m_One()) &&
             !matchPattern(colStride, m_One());
    };
    auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
    std::vector<std::string> args = {
        "tj_smem + " + std::to_string(dl.getSmemOffset())};
    for (Value v : op->getOperands()) // A's view, B's view, K range, acc
      args.push_back(name(v, op));
    args.push_back(n);
    // The tensor maps of A's and B's views where the launch encoded both.
    if (std::optional<uint64_t> i = dl.getTensorMaps()) {
      std::string ok = "(tj_maps_ok >> " + std::to_string(*i) + " & 3) == 3";
      args.push_back(ok + " ? &tj_map" + std::to_string(*i) + " : nullptr");
      args.push_back("&tj_map" + std::to_string(*i + 1));
    } else {
      args.push_back("nullptr");
      args.push_back("nullptr");
    }
    if (dl.getResident()) {
      emitNextProgramDotArgs(dl);
      args.push_back("&tj_ring");
      args.push_back("&tj_next");
    }
    stmt("tj_dot_loop<" + std::to_string(dl.getM()) + ", " +
         std::to_string(dl.getN()) + ", " + std::to_string(dl.getK()) + ", " +
         std::to_string(dl.getStages()) + ", " + std::to_string(threads) +
         ", " + groupOf(dl.getResult()) + ", " +
         flag(rowsContiguous(dl.getARowStride(), dl.getAColStride())) + ", " +
         flag(rowsContiguous(dl.getBRowStride(), dl.getBColStride())) + ", " +
         flag(matchPattern(dl.getAcc(), m_AnyZeroFloat())) + ", " +
         flag(func->hasAttr(attr::kDotSpecialize)) + ">(" +
         llvm::join(args, ", ") + ");");
    return true;
  }
  if (auto ld = dyn_cast<simt::LoadOp>(op)) {
    Type et = elemType(ld.getType());
    std::string other =
        ld.getOther() ? name(ld.getOther(), op) : zeroOf(et, op);
    // Element e, read where `mask` (if any) holds.
    auto masked = [&](Value mask, const std::string &e) {
      std::string access =
          name(ld.getPtr(), op) + "[" + offsetRef(ld.getOffsets(), e, op) +
          "]";
      if (!mask)
        return access;
      return ref(mask, e, op) + " ? " + access + " : " + other;
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      define(op, ld.getResult(),
             [&](const std::string &e) { return masked(ld.getMask(), e); });
      return true;
    }
    std::string n = bind(ld.getResult());
    line(declaration(ld.getType(), n, op) + ";");
    auto [mask, guard] = splitUniformMask(ld.getMask(), op);
    if (!guard.empty())
      stmt("if (" + guard + ") {"), ++indent;
    forEachGroup(
        op, ld.getPtr(), ld.getOffsets(), mask, et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vload<" + bytes + ">(&" + n + "[tj_g], " + addr + ");";
        },
        [&](const std::string &e) {
          return n + "[" + e + "] = " + masked(mask, e) + ";";
        });
    if (!guard.empty()) {
      --indent;
      line("} else {");
      ++indent;
      forEach(*vecLen(ld.getType(), op), [&](const std::string &e) {
        stmt(n + "[" + e + "] = " + other + ";");
      });
      --indent;
      line("}");
    }
    return true;
  }
  if (auto st = dyn_cast<simt::StoreOp>(op)) {
    auto store = [&](const std::string &e) {
      return name(st.getPtr(), op) + "[" + offsetRef(st.getOffsets(), e, op) +
             "] = " + ref(st.getValue(), e, op) + ";";
    };
    auto k = vecLen(st.getOffsets().getType(), op);
    if (!k) {
      // A uniform scalar store: one thread does it.
      std::string cond = "threadIdx.x == 0";
      if (st.getMask())
        cond += " && " + ref(st.getMask(), "", op);
      stmt("if (" + cond + ") " + store(""));
      return true;
    }
    // Element e, stored where `mask` (if any) holds.
    auto masked = [&](Value mask, const std::string &e) {
      if (mask)
        return "if (" + ref(mask, e, op) + ") " + store(e);
      return store(e);
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(masked(st.getMask(), e)); });
      return true;
    }
    Type et = elemType(st.getValue().getType());
    std::string value = name(st.getValue(), op);
    auto [mask, guard] = splitUniformMask(st.getMask(), op);
    if (!guard.empty())
      stmt("if (" + guard + ") {"), ++indent;
    forEachGroup(
        op, st.getPtr(), st.getOffsets(), mask, et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vstore<" + bytes + ">(" + addr + ", &" + value +
                 "[tj_g]);";
        },
        [&](const std::string &e) { return masked(mask, e); });
    if (!guard.empty())
      --indent, line("}");
    return true;
  }
  if (auto cp = dyn_cast<simt::CopyAsyncOp>(op)) {
    std::string dst = name(cp.getDst(), op), src = name(cp.getSrc(), op);
    auto at = [&](const std::string &p, Value offs, const std::string &e) {
      return p + "[" + offsetRef(offs, e, op) + "]";
    };
    // Lanes that cannot take a whole group copy element by element, at once.
    auto element = [&](const std::string &e) {
      std::string copy = at(dst, cp.getDstOffsets(), e) + " = " +
                         at(src, cp.getSrcOffsets(), e) + ";";
      if (cp.getMask())
        return "if (" + ref(cp.getMask(), e, op) + ") " + copy;
      return copy;
    };
    auto k = vecLen(cp.getSrcOffsets().getType(), op);
    if (!k)
      fail(op, "copies tiles: its offsets must be per-thread vectors");
    int64_t width = accessWidth(op);
    Type et = cp.getSrc().getType().getElementType();
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(element(e)); });
      return true;
    }
    forEachGroup(
        op, cp.getSrc(), cp.getSrcOffsets(), cp.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_copy_async<" + bytes + ">(" + dst + " + " +
                 ref(cp.getDstOffsets(), "tj_g", op) + ", " + addr + ");";
        },
        element, cp.getDst(), cp.getDstOffsets());
    return true;
  }
  if (auto pf = dyn_cast<tile::PrefetchL2Op>(op)) {
    // One lane asks; the copy engine fetches the range.
    stmt("if (threadIdx.x == 0) tj_prefetch_l2(" + name(pf.getPtr(), op) +
         " + " + name(pf.getOffset(), op) + ", " + name(pf.getCount(), op) +
         ");");
    return true;
  }
  if (isa<tile::CopyCommitOp>(op)) {
    stmt("tj_copy_commit();");
    return true;
  }
  if (auto w = dyn_cast<tile::CopyWaitOp>(op)) {
    stmt("tj_copy_wait<" + std::to_string(w.getPending()) + ">();");
    if (!w.getLaneOnly())
      stmt("__syncthreads();");
    return true;
  }
  if (auto ap = dyn_cast<tile::AddPtrOp>(op)) {
    define(op, ap.getResult(), [&](const std::string &) {
      return name(ap.getPtr(), op) + " + " + name(ap.getOffset(), op);
    });
    return true;
  }
  if (auto sa = dyn_cast<tile::SharedAllocOp>(op)) {
    // A pointer into tj_smem within this function, so nvcc keeps its
    // accesses as shared-memory ones (LDS/STS), not generic.
    define(op, sa.getResult(), [&](const std::string &) {
      return "reinterpret_cast<" + scalarType(sa.getType(), op) +
             ">(tj_smem + " + std::to_string(sa.getOffset()) + ")";
    });
    return true;
  }
  if (isa<tile::BarrierOp>(op)) {
    stmt("__syncthreads();");
    return true;
  }
  return false;
}

void KernelEmitter::emitClusterReduce(tile::ClusterReduceOp op) {
  std::string t = scalarType(op.getSrcs().front().getType(), op);
  if (clusterSize == 1) { // a cluster of one program: nothing to combine
    for (auto [src, res] : llvm::zip(op.getSrcs(), op.getResults()))
      line(t + " " + bind(res) + " = " + name(src, op) + ";");
    return;
  }
  std::string id = "tj_cluster" + std::to_string(clusterOps++);
  std::string n = std::to_string(op.getSrcs().size());
  std::vector<std::string> srcs;
  for (Value src : op.getSrcs())
    srcs.push_back(name(src, op));
  std::string combiner =
      std::to_string(clusterSize) + ", " + combinerName(op.getKind());
  line(t + " " + id + "[" + n + "] = {" + llvm::join(srcs, ", ") + "};");
  // In a loop the slots are written again each run: two buffers used in
  // turn.
  bool once = clusterBuffers(op) == 1;
  std::string bar = std::to_string(clusterMbarrier(op));
  std::string slots = std::to_string(clusterBuffers(op) * clusterSize *
                                     int64_t(op.getSrcs().size()));
  line("__shared__ " + t + " " + id + "_slots[" + slots + "];");
  locate(op);
  if (once)
    stmt("tj_cluster_reduce_once<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_init_waited, " + id +
         ");");
  else
    stmt("tj_cluster_reduce_loop<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_runs" + bar +
         ", tj_cluster_init_waited, " + id + ");");
  for (auto [i, res] : llvm::enumerate(op.getResults()))
    line(t + " " + bind(res) + " = " + id + "[" + std::to_string(i) + "];");
}


/// `tj_next`: the A row, B column and K range of a resident kernel's dot
/// loop for the program after this one (simt-resident-programs checked that
/// they follow from program ids, grid sizes, parameters and arithmetic):
/// those ops printed again in a scope where tj_pid_* name that program.
void KernelEmitter::emitNextProgramDotArgs(simt::DotLoopOp op) {
  Value roots[] = {op.getARow0(), op.getBCol0(), op.getKBegin(),
                   op.getKEnd()};
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> work(std::begin(roots), std::end(roots));
  while (!work.empty())
    if (Operation *def = work.pop_back_val().getDefiningOp();
        def && slice.insert(def).second)
      llvm::append_range(work, def->getOperands());
  line("tj_dot_next tj_next;");
  line("{");
  ++indent;
  line("const long long tj_prog_next = tj_prog + gridDim.x;");
  line("tj_next.has = tj_prog_next < tj_programs;");
  declareProgramIds("tj_prog_next");
  auto outer = names;
  for (Operation &o : *op->getBlock()) {
    if (&o == op.getOperation())
      break;
    if (slice.contains(&o))
      emitOp(&o);
  }
  stmt("tj_next.aRow0 = " + name(roots[0], op) +
       ", tj_next.bCol0 = " + name(roots[1], op) +
       ", tj_next.kBegin = " + name(roots[2], op) +
       ", tj_next.kEnd = " + name(roots[3], op) + ";");
  names = std::move(outer);
  --indent;
  line("}");
}

} // namespace emit
} // namespace tilejit
