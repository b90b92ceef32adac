//===- Inputs.cpp - realistic CE+TVD inputs -------------------------------===//
//
// Rows are generated in fixed-size blocks, each with its own mt19937_64
// seeded from (seed, block index); threads take whole blocks, so the output
// is the same for any thread count. BT = 4096, V = 151936 is 6e8 elements
// per tensor, hence the threads.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/Inputs.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>

namespace tilejit {
namespace ref {

namespace {

constexpr int64_t kRowsPerBlock = 16;
constexpr int kPeaksPerRow = 3;
constexpr float kStudentSd = 2.0f, kTeacherNoiseSd = 0.5f;
constexpr float kPeakMin = 4.0f, kPeakMax = 10.0f;

// SplitMix64 finalizer: decorrelates the per-block seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Rounds a float row to `dtype` and writes it at element `offset` of `out`.
void storeRow(const std::vector<float> &row, DType dtype, uint8_t *out,
              int64_t offset) {
  if (dtype == DType::F32) {
    std::memcpy(out + offset * sizeof(float), row.data(),
                row.size() * sizeof(float));
    return;
  }
  auto *dst = reinterpret_cast<uint16_t *>(out) + offset;
  for (size_t v = 0; v < row.size(); ++v)
    dst[v] = dtype == DType::BF16 ? floatToBf16(row[v]) : floatToHalf(row[v]);
}

// Generates rows [begin, end) from one engine.
void generateBlock(CeTvdInputs &in, int64_t begin, int64_t end,
                   std::mt19937_64 &rng) {
  std::normal_distribution<float> logit(0.0f, kStudentSd);
  std::normal_distribution<float> noise(0.0f, kTeacherNoiseSd);
  std::uniform_int_distribution<int64_t> token(0, in.V - 1);
  std::uniform_real_distribution<float> peak(kPeakMin, kPeakMax);
  std::vector<float> s(in.V), t(in.V);
  for (int64_t row = begin; row < end; ++row) {
    int64_t y = token(rng);
    in.target[row] = row % 7 == 6 ? kCeTvdIgnoreIndex : y;
    for (float &x : s)
      x = logit(rng);
    for (int i = 0; i < kPeaksPerRow; ++i)
      s[token(rng)] += peak(rng);
    for (int64_t v = 0; v < in.V; ++v)
      t[v] = s[v] + noise(rng);
    storeRow(s, in.dtype, in.student.data(), row * in.V);
    storeRow(t, in.dtype, in.teacher.data(), row * in.V);
  }
}

} // namespace

CeTvdInputs makeCeTvdInputs(int64_t BT, int64_t V, DType dtype, uint64_t seed) {
  if (BT < 0 || V <= 0)
    throw Error("makeCeTvdInputs: BT must be >= 0 and V positive (got BT = " +
                std::to_string(BT) + ", V = " + std::to_string(V) + ")");
  if (!isFloat(dtype))
    throw Error(std::string("makeCeTvdInputs: dtype must be bf16, f16 or "
                            "f32 (got ") +
                dtypeName(dtype) + ")");
  // Guard the byte counts below against wrapping around.
  int64_t elements;
  if (__builtin_mul_overflow(BT, V, &elements) ||
      __builtin_mul_overflow(elements, int64_t(8), &elements))
    throw Error("makeCeTvdInputs: BT x V = " + std::to_string(BT) + " x " +
                std::to_string(V) + " elements is too large");
  CeTvdInputs in;
  in.dtype = dtype;
  in.BT = BT;
  in.V = V;
  size_t bytes = static_cast<size_t>(BT) * V * dtypeSize(dtype);
  in.student.resize(bytes);
  in.teacher.resize(bytes);
  in.target.resize(BT);

  int64_t blocks = (BT + kRowsPerBlock - 1) / kRowsPerBlock;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t b = next++; b < blocks; b = next++) {
      std::mt19937_64 rng(mix(seed ^ mix(static_cast<uint64_t>(b))));
      generateBlock(in, b * kRowsPerBlock,
                    std::min(BT, (b + 1) * kRowsPerBlock), rng);
    }
  };
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < std::min<int64_t>(hw, blocks); ++i)
    pool.emplace_back(worker);
  for (std::thread &t : pool)
    t.join();
  return in;
}

} // namespace ref
} // namespace tilejit
