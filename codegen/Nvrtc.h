//===- Nvrtc.h - CUDA C++ to PTX/CUBIN with NVRTC ---------------*- C++ -*-===//
//
// Compiles generated CUDA C++ in-process with NVRTC, and runs the toolkit's
// command-line tools (ptxas, cuobjdump/nvdisasm) for validation and
// inspection. No GPU is needed for anything here.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_CODEGEN_NVRTC_H
#define TILEJIT_CODEGEN_NVRTC_H

#include <string>
#include <vector>

namespace tilejit {
namespace nvrtc {

struct CompileResult {
  /// PTX text, without NVRTC's trailing NUL.
  std::string ptx;
  /// ELF image for the exact arch; empty when compiling for "compute_XX".
  std::vector<char> cubin;
  /// NVRTC's log (warnings; empty when the compile was clean).
  std::string log;
  /// NVRTC produces PTX and CUBIN in one nvrtcCompileProgram call (front end,
  /// NVVM, then its built-in ptxas), so they cannot be timed apart: ptxMs is
  /// that whole call, cubinMs only the extraction of the CUBIN (about zero).
  double ptxMs = 0.0;
  double cubinMs = 0.0;
};

/// Compiles `source` (named `fileName` in diagnostics) for `arch`: "sm_90"
/// (or "sm_90a") yields PTX and a CUBIN, "compute_90" yields PTX only.
/// Options: -std=c++17 -default-device and the toolkit include directory (for
/// sources that include cuda_bf16.h and the like; tilejit's emitted kernels
/// include nothing) plus `extraOptions`. --use_fast_math is
/// deliberately not used: it turns expf/logf/division into approximations,
/// and tilejit's results must match the IEEE-accurate reference.
/// Throws tilejit::Error with the file name and NVRTC's log on failure.
CompileResult compile(const std::string &source, const std::string &fileName,
                      const std::string &arch,
                      const std::vector<std::string> &extraOptions = {});

/// NVRTC's version, e.g. "13.0".
std::string nvrtcVersion();

/// Runs `ptxas -arch=<sm arch> <file> -o /dev/null` on `ptx`; true when
/// ptxas accepts it. *log (if given) receives ptxas's output, or why ptxas
/// could not be run (e.g. not found in $CUDA_HOME/bin, /usr/local/cuda/bin
/// or PATH). `arch` may be "sm_90" or "compute_90". With `verbose` (-v) the
/// log also has each function's registers and spill bytes.
bool ptxasAccepts(const std::string &ptx, const std::string &arch,
                  std::string *log = nullptr, bool verbose = false);

/// SASS listing of `cubin` from `cuobjdump --dump-sass` (or `nvdisasm` when
/// cuobjdump is missing). Throws tilejit::Error if neither tool is found or
/// the tool fails.
std::string disassembleCubin(const std::vector<char> &cubin);

} // namespace nvrtc
} // namespace tilejit

#endif // TILEJIT_CODEGEN_NVRTC_H
