//===- FileIO.h - whole-file reads and writes for the caches ----*- C++ -*-===//
//
// Shared by the kernel cache (Cache.cpp) and the tuning database
// (TuningDatabase.cpp), which both publish files atomically: write a temp
// file named by uniqueName() in the target's directory, then rename it.
// No MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_FILEIO_H
#define TILEJIT_RUNTIME_FILEIO_H

#include "llvm/ADT/StringRef.h"

#include <filesystem>
#include <string>

namespace tilejit {

/// The whole file in `out`; false when it cannot be opened or read.
bool readFile(const std::filesystem::path &p, std::string &out);

/// Writes and closes; false (with errno's message in *why) on any failure.
bool writeFile(const std::filesystem::path &p, llvm::StringRef bytes,
               std::string *why);

/// A name no other process or thread will pick: <stem>-<pid>-<n>.
std::string uniqueName(const std::string &stem);

} // namespace tilejit

#endif // TILEJIT_RUNTIME_FILEIO_H
