//===- InterpValues.h - the interpreter's values and arithmetic ------*- C++ -*-===//
//
// A program's SSA values (scalars or 1-D tiles of one element kind) and
// the rounding, conversion and combining rules every op of the CPU
// interpreter shares (runtime/Interpreter.cpp). Internal to runtime/.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_INTERPVALUES_H
#define TILEJIT_RUNTIME_INTERPVALUES_H

#include "tilejit/Interpreter.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace tilejit {
namespace interp {

using namespace mlir;

//===----------------------------------------------------------------------===//
// Runtime values
//===----------------------------------------------------------------------===//

enum class Elem : uint8_t { I1, I32, I64, BF16, F16, F32, Ptr };

inline bool isFloatElem(Elem e) {
  return e == Elem::BF16 || e == Elem::F16 || e == Elem::F32;
}

inline const char *elemName(Elem e) {
  switch (e) {
  case Elem::I1:
    return "i1";
  case Elem::I32:
    return "i32";
  case Elem::I64:
    return "i64";
  case Elem::BF16:
    return "bf16";
  case Elem::F16:
    return "f16";
  case Elem::F32:
    return "f32";
  case Elem::Ptr:
    return "ptr";
  }
  return "?";
}

using FVec = std::vector<float>;
using IVec = std::vector<int64_t>;

/// A scalar (one element) or a 1-D tile. The payload is immutable and shared,
/// so copying a value (into loop-carried arguments, for example) is cheap.
struct RuntimeValue {
  Elem elem = Elem::I32;
  bool tile = false;
  std::shared_ptr<const FVec> f; // float elements
  std::shared_ptr<const IVec> i; // integer elements
  int ptrArg = -1;    // pointers: the kernel argument (past the last one: a
                      // shared array of the program) ...
  int64_t ptrOff = 0; // ... and an element offset into it

  size_t size() const { return f ? f->size() : i ? i->size() : 1; }
  int64_t intScalar() const { return (*i)[0]; }
  float floatScalar() const { return (*f)[0]; }
};

/// `v` held by each of `lanes` threads: its elements repeated `lanes`
/// times, thread-major (a pointer, uniform, stays as it is).
inline RuntimeValue repeatForThreads(RuntimeValue v, int64_t lanes) {
  if (lanes == 1 || v.elem == Elem::Ptr)
    return v;
  auto repeat = [&](const auto &src) {
    using Vec = std::remove_cv_t<std::remove_reference_t<decltype(*src)>>;
    auto out = std::make_shared<Vec>();
    out->reserve(src->size() * lanes);
    for (int64_t t = 0; t < lanes; ++t)
      out->insert(out->end(), src->begin(), src->end());
    return out;
  };
  if (v.f)
    v.f = repeat(v.f);
  else if (v.i)
    v.i = repeat(v.i);
  return v;
}

/// Sign-extends the low `width(e)` bits of `x` (i1: 0 or 1).
inline int64_t normalize(uint64_t x, Elem e) {
  switch (e) {
  case Elem::I1:
    return static_cast<int64_t>(x & 1u);
  case Elem::I32:
    return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(x)));
  default:
    return static_cast<int64_t>(x);
  }
}

/// The value of `x` read as an unsigned integer of `e`'s width.
inline uint64_t zext(int64_t x, Elem e) {
  switch (e) {
  case Elem::I1:
    return static_cast<uint64_t>(x) & 1u;
  case Elem::I32:
    return static_cast<uint32_t>(x);
  default:
    return static_cast<uint64_t>(x);
  }
}

/// The signed value of normalized `x` (only i1 differs: true is -1).
inline int64_t sext(int64_t x, Elem e) { return e == Elem::I1 ? -x : x; }

inline unsigned bitWidth(Elem e) {
  return e == Elem::I1 ? 1 : e == Elem::I32 ? 32 : 64;
}

/// Rounds a float to the nearest value of float type `e`, ties to even.
inline float roundTo(float x, Elem e) {
  if (e == Elem::BF16)
    return bf16ToFloat(floatToBf16(x));
  if (e == Elem::F16)
    return halfToFloat(floatToHalf(x));
  return x;
}

inline void roundInPlace(FVec &v, Elem e) {
  if (e == Elem::BF16) {
    for (float &x : v)
      x = bf16ToFloat(floatToBf16(x));
  } else if (e == Elem::F16) {
    for (float &x : v)
      x = halfToFloat(floatToHalf(x));
  }
}

inline const llvm::fltSemantics &semanticsOf(Elem e) {
  if (e == Elem::BF16)
    return llvm::APFloat::BFloat();
  if (e == Elem::F16)
    return llvm::APFloat::IEEEhalf();
  return llvm::APFloat::IEEEsingle();
}

/// APFloat (of any float type) -> float, exactly for bf16/f16/f32.
inline float apToFloat(llvm::APFloat v) {
  bool losesInfo = false;
  v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return v.convertToFloat();
}

/// Integer -> float type `e` with a single rounding (nearest even).
inline float intToFloat(int64_t v, bool isUnsigned, Elem e) {
  if (e == Elem::F32)
    return isUnsigned ? static_cast<float>(static_cast<uint64_t>(v))
                      : static_cast<float>(v);
  constexpr int64_t kExact = int64_t(1) << 24; // every such int fits a float
  if (isUnsigned ? static_cast<uint64_t>(v) <= uint64_t(kExact)
                 : (v >= -kExact && v <= kExact))
    return roundTo(static_cast<float>(v), e);
  llvm::APFloat r(semanticsOf(e));
  r.convertFromAPInt(llvm::APInt(64, static_cast<uint64_t>(v)), !isUnsigned,
                     llvm::APFloat::rmNearestTiesToEven);
  return apToFloat(r);
}

/// Float -> integer of `e`'s width, truncating toward zero; saturates and
/// maps NaN to 0 (what PTX cvt.rzi does; MLIR leaves these cases poison).
inline int64_t floatToInt(float x, bool isUnsigned, Elem e) {
  if (std::isnan(x))
    return 0;
  double t = std::trunc(static_cast<double>(x));
  unsigned w = bitWidth(e);
  if (isUnsigned) {
    if (t <= 0)
      return 0;
    double maxv = std::ldexp(1.0, static_cast<int>(w)); // exclusive
    if (t >= maxv)
      return normalize(w == 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1, e);
    return normalize(static_cast<uint64_t>(t), e);
  }
  double lim = std::ldexp(1.0, static_cast<int>(w) - 1);
  if (t >= lim)
    return normalize((uint64_t(1) << (w - 1)) - 1, e);
  if (t < -lim)
    return normalize(uint64_t(1) << (w - 1), e); // the minimum
  return normalize(static_cast<uint64_t>(static_cast<int64_t>(t)), e);
}

/// MLIR arith.maximumf / minimumf: NaN propagates, -0 < +0.
inline float maximumF(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<float>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline float minimumF(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<float>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
/// One step of a reduction (tile.reduce, reduce_rows, cluster_reduce):
/// floats combine in f32 (max/min as maximumF/minimumF), integers wrap to
/// their width.
inline float combineF(ReduceKind kind, float a, float b) {
  return kind == ReduceKind::Sum   ? a + b
         : kind == ReduceKind::Max ? maximumF(a, b)
                                   : minimumF(a, b);
}
inline int64_t combineI(ReduceKind kind, int64_t a, int64_t b, Elem e) {
  return kind == ReduceKind::Sum   ? normalize(uint64_t(a) + uint64_t(b), e)
         : kind == ReduceKind::Max ? std::max(a, b)
                                   : std::min(a, b);
}

/// arith.maxnumf / minnumf: a NaN operand yields the other one.
inline float maxnumF(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return maximumF(a, b);
}
inline float minnumF(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return minimumF(a, b);
}

inline DType dtypeOfElem(Elem e) {
  switch (e) {
  case Elem::I1:
    return DType::I1;
  case Elem::I32:
    return DType::I32;
  case Elem::I64:
    return DType::I64;
  case Elem::BF16:
    return DType::BF16;
  case Elem::F16:
    return DType::F16;
  default:
    return DType::F32;
  }
}

inline std::string locationOf(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getLoc();
  return s;
}

inline std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Element type of a scalar or tile type; std::nullopt when unsupported.
inline std::optional<Elem> elemOfScalar(Type t) {
  if (t.isF32())
    return Elem::F32;
  if (t.isBF16())
    return Elem::BF16;
  if (t.isF16())
    return Elem::F16;
  if (t.isInteger(1))
    return Elem::I1;
  if (t.isInteger(32))
    return Elem::I32;
  if (t.isInteger(64) || t.isIndex())
    return Elem::I64;
  if (isa<tile::PtrType>(t))
    return Elem::Ptr;
  return std::nullopt;
}


} // namespace interp
} // namespace tilejit

#endif // TILEJIT_RUNTIME_INTERPVALUES_H
