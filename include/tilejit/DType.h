//===- DType.h - element types of tiles and buffers -------------*- C++ -*-===//
#ifndef TILEJIT_DTYPE_H
#define TILEJIT_DTYPE_H

#include <cstddef>
#include <string>

namespace tilejit {

/// Element types a kernel can load, store or compute with.
enum class DType { I1, I32, I64, BF16, F16, F32 };

/// "bf16", "f32", ... (the spelling used by the CLI and in MLIR types).
const char *dtypeName(DType t);
/// Parses "bf16"/"fp16"/"f16"/"fp32"/"f32"/"i32"/"i64"/"i1"; throws tilejit::Error.
DType parseDType(const std::string &name);
/// Storage size in bytes (i1 is stored as one byte).
size_t dtypeSize(DType t);
inline bool isFloat(DType t) {
  return t == DType::BF16 || t == DType::F16 || t == DType::F32;
}

} // namespace tilejit

#endif // TILEJIT_DTYPE_H
