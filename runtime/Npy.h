//===- Npy.h - NumPy .npy files of kernel arguments -------------*- C++ -*-===//
//
// `tilejit run --input/--output NAME=file.npy` reads and writes kernel
// arguments as NumPy arrays (np.load / np.save). The format is parsed and
// written by xtensor's xnpy (Debian's libxtensor-dev, header-only), through
// its untyped layer: tilejit picks the element type at run time, not at
// compile time as xnpy's typed load_npy<T> does. What tilejit accepts:
//
//  - versions 1.0 and 2.0 (written: 1.0), C order (fortran_order False),
//    little-endian;
//  - f32 '<f4', f16 '<f2', i32 '<i4', i64 '<i8'; bf16, which NumPy lacks, as
//    its 16-bit patterns in '<u2' (from PyTorch: t.view(torch.uint16)
//    .numpy(); back: torch.from_numpy(a).view(torch.bfloat16)).
//
// Errors are tilejit::Error naming the file: unreadable, not .npy, truncated,
// Fortran order, another dtype or shape than the argument's.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_NPY_H
#define TILEJIT_RUNTIME_NPY_H

#include "tilejit/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilejit {

/// An array as stored in a .npy file: C-order elements of `dtype`.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// The NumPy descr of `dtype` ("<f4", ...; bf16: "<u2"). Throws for i1.
std::string npyDescr(DType dtype);

/// Reads `path`, which must hold an array of `dtype` (descr npyDescr(dtype)).
NpyArray readNpy(const std::string &path, DType dtype);

/// Writes `data` (C order, product(shape) elements of `dtype`) to `path`.
void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data);

/// "(4, 151936)", as NumPy prints a shape.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace tilejit

#endif // TILEJIT_RUNTIME_NPY_H
