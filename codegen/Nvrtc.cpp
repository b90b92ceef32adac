//===- Nvrtc.cpp - CUDA C++ to PTX/CUBIN with NVRTC -----------------------===//
//
// One nvrtcCompileProgram per kernel: with --gpu-architecture=sm_XX NVRTC
// returns both the PTX (identical to what compute_XX gives) and the CUBIN, so
// a second compile would only double the cost.
//
// The toolkit is located at run time ($CUDA_HOME, $CUDA_PATH) before the
// build-time location, so a binary carried to a machine whose toolkit lives
// elsewhere still finds cuda_bf16.h and ptxas.
//
//===----------------------------------------------------------------------===//
#include "codegen/Nvrtc.h"

#include "tilejit/Error.h"
#include "tilejit/Timing.h"

#include <nvrtc.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

// Set by codegen/CMakeLists.txt from find_package(CUDAToolkit).
#ifndef TILEJIT_CUDA_INCLUDE_DIR
#define TILEJIT_CUDA_INCLUDE_DIR ""
#endif
#ifndef TILEJIT_CUDA_BIN_DIR
#define TILEJIT_CUDA_BIN_DIR ""
#endif

extern char **environ;

namespace fs = std::filesystem;

namespace tilejit {
namespace nvrtc {
namespace {

//===----------------------------------------------------------------------===//
// Finding the toolkit
//===----------------------------------------------------------------------===//

/// Candidate toolkit subdirectories (`sub` = "include" or "bin"), most
/// specific first: the environment, the build-time toolkit, the usual path.
std::vector<fs::path> toolkitDirs(const char *sub, const char *buildTimeDir) {
  std::vector<fs::path> dirs;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var); root && *root)
      dirs.push_back(fs::path(root) / sub);
  if (*buildTimeDir)
    dirs.emplace_back(buildTimeDir);
  dirs.push_back(fs::path("/usr/local/cuda") / sub);
  return dirs;
}

std::string joinPaths(const std::vector<fs::path> &dirs) {
  std::string out;
  for (const fs::path &d : dirs)
    out += (out.empty() ? "" : ", ") + d.string();
  return out;
}

/// The include directory holding cuda_bf16.h, or "" when there is none.
const std::string &cudaIncludeDir() {
  static const std::string dir = [] {
    std::error_code ec;
    for (const fs::path &d : toolkitDirs("include", TILEJIT_CUDA_INCLUDE_DIR))
      if (fs::exists(d / "cuda_bf16.h", ec))
        return d.string();
    return std::string();
  }();
  return dir;
}

bool isExecutable(const fs::path &p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

/// Full path of a toolkit program, or "" with *searched listing where we
/// looked.
std::string findTool(const std::string &name, std::string *searched) {
  std::vector<fs::path> dirs = toolkitDirs("bin", TILEJIT_CUDA_BIN_DIR);
  if (const char *path = std::getenv("PATH")) {
    std::string entries = path;
    size_t start = 0;
    while (start <= entries.size()) {
      size_t end = entries.find(':', start);
      if (end == std::string::npos)
        end = entries.size();
      if (end > start)
        dirs.emplace_back(entries.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const fs::path &d : dirs)
    if (isExecutable(d / name))
      return (d / name).string();
  if (searched) {
    // Report each directory once (PATH often repeats the toolkit's bin).
    std::vector<fs::path> unique;
    for (const fs::path &d : dirs)
      if (std::find(unique.begin(), unique.end(), d) == unique.end())
        unique.push_back(d);
    *searched = joinPaths(unique);
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Temporary files and running tools
//===----------------------------------------------------------------------===//

/// A file in the temp directory holding `contents`, removed on destruction.
class TempFile {
public:
  TempFile(const char *suffix, const void *contents, size_t size) {
    std::string pattern =
        (fs::temp_directory_path() / ("tilejit-XXXXXX" + std::string(suffix)))
            .string();
    int fd = ::mkstemps(pattern.data(), static_cast<int>(std::strlen(suffix)));
    if (fd < 0)
      throw Error("cannot create a temporary file " + pattern + ": " +
                  std::strerror(errno));
    Path = pattern;
    const char *bytes = static_cast<const char *>(contents);
    while (size > 0) {
      ssize_t n = ::write(fd, bytes, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        ::close(fd);
        throw Error("cannot write temporary file " + Path + ": " +
                    std::strerror(errno));
      }
      bytes += n;
      size -= static_cast<size_t>(n);
    }
    ::close(fd);
  }
  TempFile(const TempFile &) = delete;
  TempFile &operator=(const TempFile &) = delete;
  ~TempFile() {
    std::error_code ec;
    fs::remove(Path, ec);
  }
  const std::string &path() const { return Path; }

private:
  std::string Path;
};

/// Runs `program args...` without a shell, capturing stdout and stderr
/// together in *output. Returns the exit status, or -1 (with the reason in
/// *output) when the program could not be started or did not exit normally.
int runTool(const std::string &program, const std::vector<std::string> &args,
            std::string *output) {
  output->clear();
  std::vector<char *> argv;
  argv.push_back(const_cast<char *>(program.c_str()));
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);

  int pipeFds[2];
  // Close-on-exec: with compiles on several threads, another thread's
  // child must not inherit this pipe's write end (its reader would wait for
  // that child too).
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
    *output = std::string("pipe failed: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, pipeFds[0]);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipeFds[1]);
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(),
                          environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipeFds[1]);
  if (err != 0) {
    ::close(pipeFds[0]);
    *output = "cannot run " + program + ": " + std::strerror(err);
    return -1;
  }
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(pipeFds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    output->append(buffer, static_cast<size_t>(n));
  }
  ::close(pipeFds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    *output += "\n" + program + " terminated abnormally";
    return -1;
  }
  return WEXITSTATUS(status);
}

//===----------------------------------------------------------------------===//
// NVRTC helpers
//===----------------------------------------------------------------------===//

/// Owns an nvrtcProgram.
class Program {
public:
  Program(const std::string &source, const std::string &fileName) {
    nvrtcResult r = nvrtcCreateProgram(&Prog, source.c_str(), fileName.c_str(),
                                       0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS)
      throw Error("nvrtcCreateProgram failed for " + fileName + ": " +
                  nvrtcGetErrorString(r));
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() { nvrtcDestroyProgram(&Prog); }
  nvrtcProgram get() const { return Prog; }

private:
  nvrtcProgram Prog = nullptr;
};

void check(nvrtcResult r, const char *call, const std::string &fileName) {
  if (r != NVRTC_SUCCESS)
    throw Error(std::string(call) + " failed for " + fileName + ": " +
                nvrtcGetErrorString(r));
}

/// NVRTC sizes count a terminating NUL; text we hand out must not contain it.
void stripTrailingNuls(std::string &text) {
  while (!text.empty() && text.back() == '\0')
    text.pop_back();
}

std::string programLog(const Program &prog, const std::string &fileName) {
  size_t size = 0;
  check(nvrtcGetProgramLogSize(prog.get(), &size), "nvrtcGetProgramLogSize",
        fileName);
  std::string log(size, '\0');
  if (size > 0)
    check(nvrtcGetProgramLog(prog.get(), log.data()), "nvrtcGetProgramLog",
          fileName);
  stripTrailingNuls(log);
  return log;
}

bool startsWith(const std::string &s, const char *prefix) {
  return s.rfind(prefix, 0) == 0;
}

/// "compute_90" -> "sm_90"; ptxas only knows real architectures.
std::string realArch(const std::string &arch) {
  if (startsWith(arch, "compute_"))
    return "sm_" + arch.substr(std::strlen("compute_"));
  return arch;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

CompileResult compile(const std::string &source, const std::string &fileName,
                      const std::string &arch,
                      const std::vector<std::string> &extraOptions) {
  if (!startsWith(arch, "sm_") && !startsWith(arch, "compute_"))
    throw Error("invalid GPU architecture '" + arch +
                "' (expected e.g. sm_90 or compute_90)");
  std::vector<std::string> options = {"--gpu-architecture=" + arch,
                                      "-std=c++17", "-default-device"};
  if (!cudaIncludeDir().empty())
    options.push_back("-I" + cudaIncludeDir());
  options.insert(options.end(), extraOptions.begin(), extraOptions.end());
  std::vector<const char *> optionPointers;
  for (const std::string &o : options)
    optionPointers.push_back(o.c_str());

  Program prog(source, fileName);
  CompileResult result;
  auto start = std::chrono::steady_clock::now();
  nvrtcResult r =
      nvrtcCompileProgram(prog.get(), static_cast<int>(optionPointers.size()),
                          optionPointers.data());
  result.ptxMs = msSince(start);
  result.log = programLog(prog, fileName);
  if (r != NVRTC_SUCCESS) {
    std::string message = "NVRTC failed to compile " + fileName + " for " +
                          arch + " (" + nvrtcGetErrorString(r) + "):\n" +
                          result.log;
    if (cudaIncludeDir().empty())
      message += "\nnote: no CUDA include directory with cuda_bf16.h was "
                 "found (looked in " +
                 joinPaths(toolkitDirs("include", TILEJIT_CUDA_INCLUDE_DIR)) +
                 "); set CUDA_HOME to the CUDA toolkit";
    throw Error(message);
  }

  size_t ptxSize = 0;
  check(nvrtcGetPTXSize(prog.get(), &ptxSize), "nvrtcGetPTXSize", fileName);
  result.ptx.assign(ptxSize, '\0');
  check(nvrtcGetPTX(prog.get(), result.ptx.data()), "nvrtcGetPTX", fileName);
  stripTrailingNuls(result.ptx);

  // A virtual architecture (compute_XX) has no machine code.
  if (startsWith(arch, "sm_")) {
    start = std::chrono::steady_clock::now();
    size_t cubinSize = 0;
    check(nvrtcGetCUBINSize(prog.get(), &cubinSize), "nvrtcGetCUBINSize",
          fileName);
    result.cubin.resize(cubinSize);
    check(nvrtcGetCUBIN(prog.get(), result.cubin.data()), "nvrtcGetCUBIN",
          fileName);
    result.cubinMs = msSince(start);
  }
  return result;
}

std::string nvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcResult r = ::nvrtcVersion(&major, &minor); r != NVRTC_SUCCESS)
    throw Error(std::string("nvrtcVersion failed: ") + nvrtcGetErrorString(r));
  return std::to_string(major) + "." + std::to_string(minor);
}

bool ptxasAccepts(const std::string &ptx, const std::string &arch,
                  std::string *log, bool verbose) {
  std::string scratch;
  std::string &out = log ? *log : scratch;
  std::string searched;
  std::string ptxas = findTool("ptxas", &searched);
  if (ptxas.empty()) {
    out = "ptxas not found (looked in " + searched +
          "); set CUDA_HOME to the CUDA toolkit";
    return false;
  }
  try {
    TempFile file(".ptx", ptx.data(), ptx.size());
    // PTX built for the arch-specific variant (sm_90a: wgmma) assembles
    // for that variant only.
    std::string real = realArch(arch);
    if (ptx.find(".target " + real + "a") != std::string::npos)
      real += "a";
    std::vector<std::string> args = {"-arch=" + real, file.path(), "-o",
                                     "/dev/null"};
    if (verbose)
      args.push_back("-v");
    int status = runTool(ptxas, args, &out);
    return status == 0;
  } catch (const Error &e) {
    out = e.what();
    return false;
  }
}

std::string disassembleCubin(const std::vector<char> &cubin) {
  if (cubin.empty())
    throw Error("cannot disassemble an empty CUBIN");
  std::string searched;
  std::string tool = findTool("cuobjdump", &searched);
  std::vector<std::string> args = {"--dump-sass"};
  if (tool.empty()) {
    tool = findTool("nvdisasm", nullptr);
    args.clear();
  }
  if (tool.empty())
    throw Error("cannot disassemble the CUBIN: neither cuobjdump nor nvdisasm "
                "was found (looked in " +
                searched + "); set CUDA_HOME to a full CUDA toolkit");
  TempFile file(".cubin", cubin.data(), cubin.size());
  args.push_back(file.path());
  std::string output;
  int status = runTool(tool, args, &output);
  if (status != 0)
    throw Error(tool + " failed on the CUBIN (exit status " +
                std::to_string(status) + "):\n" + output);
  return output;
}

} // namespace nvrtc
} // namespace tilejit
