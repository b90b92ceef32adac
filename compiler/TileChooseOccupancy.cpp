//===- TileChooseOccupancy.cpp - programs per SM for a kept row ----------===//
//
// A kernel that keeps rows on chip (tile-keep-rows' `tile.shared_bytes`)
// can have as many programs per SM as its shared memory allows (a row loss
// kept over a cluster of 8 at V = 151936 takes 40 KiB: 5 per SM), unless
// ptxas, free to take up to 255 registers per thread, takes more than
// those programs leave. This pass asks for them as the launch bounds'
// minimum blocks per SM (`tile.min_programs_per_sm`), so that ptxas keeps
// the registers under 64 K / (programs x threads):
//
//   programs = min(228 KiB / (shared bytes + 2 KiB), 2048 / threads,
//                  64 K / (threads x 40))
//
// (2 KiB: the block's own reductions and the 1 KiB the GPU reserves per
// block; 40 registers per thread is the floor below which the row walks
// spill. The limits are sm_90's, as are tile-keep-rows' arrays.) On the
// H200 the choice was within 2 % of the other counts
// (docs/performance-row-losses.md).
// `tile.programs_per_sm = n` pins n for any kernel instead (0: this
// choice); a kernel that sets `tile.min_programs_per_sm` itself is left
// alone, as is one that keeps nothing and is not pinned.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>

namespace tilejit {
#define GEN_PASS_DEF_TILECHOOSEOCCUPANCY
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

constexpr int64_t kSharedPerSm = 228 * 1024;
constexpr int64_t kBlockOverheadBytes = 2 * 1024;
constexpr int64_t kThreadsPerSm = 2048;
constexpr int64_t kRegistersPerSm = 64 * 1024;
constexpr int64_t kRegisterFloor = 40;

struct TileChooseOccupancyPass
    : public impl::TileChooseOccupancyBase<TileChooseOccupancyPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(attr::kKernel) ||
          kernel->hasAttr(attr::kMinProgramsPerSm))
        return;
      auto warps = kernel->getAttrOfType<IntegerAttr>(attr::kNumWarps);
      if (!warps || warps.getInt() <= 0)
        return;
      int64_t threads = 32 * warps.getInt(), programs = 0;
      auto pinned = kernel->getAttrOfType<IntegerAttr>(attr::kProgramsPerSm);
      auto shared = kernel->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
      if (pinned && pinned.getInt() > 0) {
        programs = pinned.getInt();
      } else if (auto keep = kernel->getAttrOfType<IntegerAttr>(attr::kKeepRow);
                 keep && keep.getInt() != 0 && shared && shared.getInt() > 0) {
        programs =
            std::min({kSharedPerSm / (shared.getInt() + kBlockOverheadBytes),
                      kThreadsPerSm / threads,
                      kRegistersPerSm / (threads * kRegisterFloor)});
      }
      if (programs > 1)
        kernel->setAttr(
            attr::kMinProgramsPerSm,
            IntegerAttr::get(IntegerType::get(&getContext(), 64), programs));
    });
  }
};

} // namespace
} // namespace tilejit
