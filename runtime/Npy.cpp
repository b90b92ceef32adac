//===- Npy.cpp - NumPy .npy files through xtensor's xnpy ------------------===//
#include "runtime/Npy.h"

#include "tilejit/Error.h"

#include <xtensor/xnpy.hpp>

#include <cstring>
#include <fstream>

namespace tilejit {

std::string npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "<u2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::I1:
    break;
  }
  throw Error(std::string(".npy files of ") + dtypeName(dtype) +
              " are not supported");
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

NpyArray readNpy(const std::string &path, DType dtype) {
  std::string want = npyDescr(dtype);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open " + path + ": " + std::strerror(errno));
  auto load = [&] {
    try {
      return xt::detail::load_npy_file(in);
    } catch (const std::runtime_error &e) {
      throw Error(path + " is not a readable .npy file (" + e.what() + ")");
    }
  };
  xt::detail::npy_file file = load();
  if (!in) // the data was shorter than the header's shape says
    throw Error(path + " is truncated: its data is shorter than its shape");
  if (file.m_fortran_order)
    throw Error(path + " is in Fortran order; save it in C order "
                "(np.ascontiguousarray)");
  if (file.m_typestring != want)
    throw Error(path + " holds '" + file.m_typestring + "' elements, not " +
                dtypeName(dtype) + " ('" + want + "')");
  NpyArray a;
  a.dtype = dtype;
  for (size_t d : file.m_shape)
    a.shape.push_back(int64_t(d));
  a.data.assign(file.ptr(), file.ptr() + file.n_bytes());
  return a;
}

void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data) {
  std::string descr = npyDescr(dtype);
  std::vector<size_t> dims(shape.begin(), shape.end());
  size_t n = 1;
  for (size_t d : dims)
    n *= d;
  std::ofstream out(path, std::ios::binary);
  if (!out)
    throw Error("cannot write " + path + ": " + std::strerror(errno));
  xt::detail::write_header(out, descr, /*fortran_order=*/false, dims);
  out.write(static_cast<const char *>(data),
            std::streamsize(n * dtypeSize(dtype)));
  if (!out.flush())
    throw Error("cannot write " + path + ": " + std::strerror(errno));
}

} // namespace tilejit
