//===- ScaleGrad.cpp - a saved gradient times its upstream gradient -------===//
//
// A reduced loss whose kernel already wrote G = d loss / d x (CE+TVD with
// reduction mean or sum, the linear CE) gets the upstream gradient g of the
// scalar loss only in backward, and d (g loss) / dx = g G. scale_grad
// multiplies G by g in place. It reads g from device memory, so backward
// never synchronizes with the host and can be captured in a CUDA graph; and
// when g == 1, which is what loss.backward() passes, each program reads g
// and ends, without touching G.
//
// The programs walk G with a stride of their count: a launch of a few
// programs per SM covers any size, so the g == 1 case costs one launch, not
// one program per tile. Offsets are 64-bit: G may hold more than 2^31
// elements (a V x d weight gradient).
//
//===----------------------------------------------------------------------===//
#include "tilejit/KernelSpec.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildScaleGrad(const Config &c) {
  KernelBuilder k("scale_grad", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value grad = k.pointerArg("grad", c.dtype);
  Value scale = k.pointerArg("scale", DType::F32);
  Value n = k.scalarArg("n", DType::I64);
  Value g = k.load(scale, k.constant(0, DType::I32));
  Value block = k.constant(BLOCK, DType::I64);
  k.ifThen(g != 1.0, [&] {
    Value first = k.programId(0).to(DType::I64) * block;
    Value step = k.numPrograms(0).to(DType::I64) * block;
    k.forRange(first, n, step, [&](Value i) {
      Value tile = grad + i;
      Value lanes = k.arange(BLOCK);
      Value left = n - i; // > 0, and may exceed 2^31
      Value in = lanes < where(left < block, left, block).to(DType::I32);
      Value x = k.load(tile, lanes, in, 0).to(DType::F32);
      k.store(tile, lanes, (x * g).to(c.dtype), in);
    });
  });
  return k.finish();
}

} // namespace

KernelSpec scaleGradSpec() {
  KernelSpec s;
  s.name = "scale_grad";
  s.summary = "grad *= scale[0] in place unless scale[0] == 1 (the backward "
              "of a loss whose kernel wrote its gradient)";
  s.params = {{"BLOCK_SIZE", {2048, 4096, 8192}, 4096, "elements per tile"},
              {"num_warps", {4, 8}, 8, "warps per program"}};
  s.dtypes = {DType::BF16, DType::F16, DType::F32};
  s.build = buildScaleGrad;
  return s;
}

} // namespace tilejit
