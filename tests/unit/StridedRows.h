//===- StridedRows.h - rows copied to and from a strided layout -*- C++ -*-===//
#ifndef TILEJIT_TESTS_UNIT_STRIDEDROWS_H
#define TILEJIT_TESTS_UNIT_STRIDEDROWS_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace tilejit {

/// `rows` rows of `cols` elements of `es` bytes, copied to rows `stride`
/// elements apart; the gaps hold 0x7F bytes (a large value a kernel must
/// not read).
inline std::vector<uint8_t> strided(const std::vector<uint8_t> &data,
                                    int64_t rows, int64_t cols, int64_t stride,
                                    size_t es) {
  std::vector<uint8_t> out(rows * stride * es, 0x7F);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * stride * es, data.data() + r * cols * es,
                cols * es);
  return out;
}

/// The inverse of strided.
inline std::vector<uint8_t> unstrided(const std::vector<uint8_t> &data,
                                      int64_t rows, int64_t cols,
                                      int64_t stride, size_t es) {
  std::vector<uint8_t> out(rows * cols * es);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * cols * es, data.data() + r * stride * es,
                cols * es);
  return out;
}

} // namespace tilejit

#endif // TILEJIT_TESTS_UNIT_STRIDEDROWS_H
