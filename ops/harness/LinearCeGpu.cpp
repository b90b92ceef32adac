//===- LinearCeGpu.cpp - the linear CE op on the GPU from host vectors ----===//
//
// Uploads the inputs, prepares the op (compiles, and makes its timed
// choices), runs it once (and as a CUDA graph on request), times it and
// copies the results back. What is timed is the op itself, as a caller's
// training step enqueues it.
//
//===----------------------------------------------------------------------===//
#include "ops/LinearCeParts.h"
#include "ops/harness/LinearCeOp.h"
#include "ops/harness/LinearCeRun.h"

#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/Timing.h"

#include <chrono>
#include <optional>

namespace tilejit {

LinearCeOutputs runLinearCeGpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options) {
  validateLinearCe(in, options);
  if (in.N == 0)
    return emptyLinearCe(in, options, "gpu (empty batch: nothing launched)");
  cuda::Device device = cuda::Device::open();
  LinearCeOutputs out;
  LinearCeHostRun run(in, options, out);
  // Every buffer mirrored on the device; the outputs are copied back.
  struct Mirror {
    void *host;
    size_t bytes;
    cuda::DeviceBuffer device;
  };
  std::vector<Mirror> outputs;
  std::vector<cuda::DeviceBuffer> inputs;
  run.forEachBuffer([&](const void *host, size_t bytes, bool isInput) {
    cuda::DeviceBuffer b(std::max<size_t>(bytes, 1));
    if (isInput)
      b.copyFromHost(host, bytes);
    auto *ptr = reinterpret_cast<const void *>(b.ptr());
    if (isInput)
      inputs.push_back(std::move(b));
    else
      outputs.push_back({const_cast<void *>(host), bytes, std::move(b)});
    return ptr;
  });
  const ops::LinearCeArgs &a = run.args;
  size_t wsBytes = ops::linearCeWorkspaceBytes(a, ops::Device::Gpu);
  cuda::DeviceBuffer ws(wsBytes);
  out.workspaceBytes = int64_t(wsBytes);

  // The op on a stream of its own, as a caller's would be.
  cuda::Stream stream;
  CUstream s = stream.get();
  ops::LinearCeTuning tuning;
  tuning.gemmCandidates = options.gemmCandidates;
  tuning.tuneChunkRows = options.tuneChunkRows;
  static_cast<ops::LinearCePlanInfo &>(out) = ops::prepareLinearCe(
      a, reinterpret_cast<void *>(ws.ptr()), wsBytes, tuning, s);
  out.chunks = (in.N + out.chunkRows - 1) / out.chunkRows;
  if (!options.tuneChunkRows)
    out.chunkSource.clear();

  void *w = reinterpret_cast<void *>(ws.ptr());
  auto step = [&] { ops::linearCe(a, w, wsBytes, ops::Device::Gpu, s); };
  std::function<void()> runStep = step;
  auto t0 = std::chrono::steady_clock::now();
  step();
  stream.synchronize();
  out.firstRunMs = msSince(t0);
  // The whole step as one CUDA graph: a host synchronization or a copy
  // inside the op would fail the capture.
  std::optional<cuda::Graph> graph;
  if (options.cudaGraph) {
    graph.emplace(cuda::Graph::capture(stream, [&](CUstream) { step(); }));
    runStep = [&] { graph->launch(s); };
    runStep(); // the results below come from the graph
    stream.synchronize();
    out.ranAsGraph = true;
  }
  if (options.iterations > 0) {
    out.ms = medianOf(cuda::timeEachMs(runStep, options.iterations, s));
    using Step = ops::lce::Step;
    const std::pair<Step, const char *> steps[] = {
        {Step::LogitsGemm, "logits GEMM"},
        {Step::RowsProgram, "lce_logits_grad"},
        {Step::DhGemm, "dh GEMM"},
        {Step::DwGemm, a.bias ? "dW + db GEMMs" : "dW GEMM"}};
    for (auto [which, name] : steps) {
      std::vector<double> ms;
      for (int r = 0; r < 5; ++r) {
        // The row program may write dz over the logits: fresh ones first.
        if (which == Step::RowsProgram)
          ops::lce::enqueueFirstChunkStep(a, w, wsBytes, Step::LogitsGemm, s);
        ms.push_back(cuda::timeMs(
            [&] { ops::lce::enqueueFirstChunkStep(a, w, wsBytes, which, s); },
            s));
      }
      out.chunkStepMs.push_back({name, medianOf(ms)});
    }
    runStep(); // the single steps left dW and the logits changed
    stream.synchronize();
  }
  for (Mirror &m : outputs)
    m.device.copyToHost(m.host, m.bytes);
  run.finish(in, options, out);
  out.device = device.name();
  return out;
}

} // namespace tilejit
