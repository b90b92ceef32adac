//===- DType.cpp ----------------------------------------------------------===//
#include "tilejit/DType.h"
#include "tilejit/Error.h"

namespace tilejit {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::I1:
    return "i1";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "f32";
  }
  return "?";
}

DType parseDType(const std::string &name) {
  if (name == "bf16")
    return DType::BF16;
  if (name == "fp16" || name == "f16")
    return DType::F16;
  if (name == "fp32" || name == "f32")
    return DType::F32;
  if (name == "i32")
    return DType::I32;
  if (name == "i64")
    return DType::I64;
  if (name == "i1")
    return DType::I1;
  throw Error("unknown dtype '" + name +
              "' (expected bf16, f16 or f32; fp16 and fp32 also work)");
}

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::I1:
    return 1;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I32:
  case DType::F32:
    return 4;
  case DType::I64:
    return 8;
  }
  return 0;
}

} // namespace tilejit
