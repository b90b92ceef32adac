//===- FileIO.cpp - whole-file reads and writes for the caches ------------===//
#include "runtime/FileIO.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdio>
#include <unistd.h>

namespace tilejit {

bool readFile(const std::filesystem::path &p, std::string &out) {
  FILE *f = std::fopen(p.c_str(), "rb");
  if (!f)
    return false;
  out.clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  bool ok = !std::ferror(f);
  std::fclose(f);
  return ok;
}

bool writeFile(const std::filesystem::path &p, llvm::StringRef bytes,
               std::string *why) {
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(p.string(), ec, llvm::sys::fs::OF_None);
    if (!ec) {
      os << bytes;
      os.close();
      ec = os.error();
      os.clear_error();
    }
  }
  if (ec)
    *why = "cannot write " + p.string() + ": " + ec.message();
  return !ec;
}

std::string uniqueName(const std::string &stem) {
  static std::atomic<uint64_t> counter{0};
  return stem + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

} // namespace tilejit
