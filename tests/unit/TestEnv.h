//===- TestEnv.h - temporary directories and environment variables -*- C++ -*-===//
#ifndef TILEJIT_TESTS_UNIT_TESTENV_H
#define TILEJIT_TESTS_UNIT_TESTENV_H

#include "tilejit/Error.h"

#include <cstdlib>
#include <stdlib.h>
#include <filesystem>
#include <optional>
#include <string>

namespace tilejit {

/// A fresh directory under /tmp, removed afterwards.
class TempDir {
public:
  TempDir() {
    std::string tmpl =
        std::filesystem::temp_directory_path() / "tilejit-test-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      throw Error("mkdtemp failed");
    Path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(Path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(Path, ec);
  }
  const std::filesystem::path &path() const { return Path; }

private:
  std::filesystem::path Path;
};

/// Sets (or with nullptr unsets) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : Name(name) {
    if (const char *old = std::getenv(name))
      Old = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { Old ? setenv(Name, Old->c_str(), 1) : unsetenv(Name); }

private:
  const char *Name;
  std::optional<std::string> Old;
};

} // namespace tilejit

#endif // TILEJIT_TESTS_UNIT_TESTENV_H
