// A kernel library for `tilejit --load`: y = a x, one program per row,
// registered twice to cover both ways a library can register its specs
// (the second without a reference).
#include "tilejit/KernelSpec.h"

using namespace tilejit;
using namespace tilejit::dsl;

static TileModule buildScale(const Config &c) {
  KernelBuilder k("plugin_scale", c);
  Value x = k.pointerArg("x", c.dtype), y = k.pointerArg("y", c.dtype);
  Value a = k.scalarArg("a", DType::F32), N = k.scalarArg("N", DType::I32);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value row = k.programId(0).to(DType::I64) * N.to(DType::I64);
  k.forRange(0, N, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    k.store(y + row, offs, (a * k.load(x + row, offs, offs < N, 0)).to(c.dtype),
            offs < N);
  });
  return k.finish();
}

static KernelSpec scaleSpec(const std::string &name, bool reference) {
  KernelSpec s;
  s.name = name;
  s.summary = "y = a x (a test kernel library)";
  s.params = {{"BLOCK_SIZE", {128, 256}, 128, "elements per tile"},
              {"num_warps", {4}, 4, "warps per program"}};
  s.dtypes = {DType::F32};
  s.build = buildScale;
  s.run.sizes = {{"M", "rows"}, {"N", "columns"}};
  s.run.grid = {"M"};
  s.run.args = {ArgSpec::input("x", {"M", "N"}, ArgFill::normal()),
                ArgSpec::output("y", {"M", "N"}),
                ArgSpec::scalar("a", 2), ArgSpec::sizeScalar("N", "N")};
  if (reference)
    s.run.reference = [](ReferenceArgs &r) {
      const HostTensor &x = r.in("x");
      for (int64_t i = 0; i < x.numElements(); ++i)
        r.out("y")[i] = double(float(r.scalar("a")) * float(x[i]));
    };
  return s;
}

// A static initializer, run by dlopen.
static const bool registered =
    (registerKernel(scaleSpec("plugin_scale", true)), true);

// Called by `tilejit --load` after the load.
extern "C" __attribute__((visibility("default"))) void
tilejit_register_kernels() {
  registerKernel(scaleSpec("plugin_scale_again", false));
}
