//===- TileModule.h - a built kernel, as an opaque handle -------*- C++ -*-===//
#ifndef TILEJIT_TILEMODULE_H
#define TILEJIT_TILEMODULE_H

#include "tilejit/DType.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir {
class Operation;
} // namespace mlir

namespace tilejit {

/// One parameter a kernel declares (KernelBuilder::pointerArg, scalarArg).
struct KernelParam {
  std::string name; ///< as declared ("arg<i>" for IR without names)
  bool pointer;     ///< a !tile.ptr to `dtype`, else a scalar of `dtype`
  DType dtype;
};

/// One kernel in the tile dialect (an MLIR module with one func.func), owned
/// together with its MLIR context. Cheap to copy (shared); clone() for a deep
/// copy that passes may rewrite.
class TileModule {
public:
  struct Impl;
  explicit TileModule(std::shared_ptr<Impl> impl);
  /// Parses tile IR text (e.g. written by `tilejit compile --emit=tile`).
  /// Throws tilejit::Error with the parser's diagnostics.
  static TileModule parse(const std::string &text,
                          const std::string &kernelName);

  const std::string &kernelName() const;
  /// The kernel's parameters in order. Throws tilejit::Error for a type
  /// no kernel can take.
  std::vector<KernelParam> params() const;
  /// The IR as text (MLIR's generic-free pretty form, with locations off).
  std::string str() const;
  TileModule clone() const;
  /// The underlying mlir::ModuleOp, as an Operation (for the interpreter).
  mlir::Operation *operation() const;
  Impl &impl() const { return *impl_; }

private:
  std::shared_ptr<Impl> impl_;
};

} // namespace tilejit

#endif // TILEJIT_TILEMODULE_H
