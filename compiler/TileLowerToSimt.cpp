// Placeholder being replaced by the SIMT lowering (in progress).
#include "tilejit/compiler/Passes.h"
namespace tilejit {
#define GEN_PASS_DEF_TILELOWERTOSIMT
#include "tilejit/compiler/Passes.h.inc"
namespace {
struct TileLowerToSimtPass : public impl::TileLowerToSimtBase<TileLowerToSimtPass> {
  void runOnOperation() override { signalPassFailure(); }
};
} // namespace
} // namespace tilejit
