//===- Commands.h - tilejit subcommands that live in their own files -*- C++ -*-===//
//
// Each subcommand file defines its own static llvm::cl::SubCommand and
// options (they register globally at start-up) and exposes two functions
// that tilejit.cpp's main calls after parsing the command line.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TOOLS_COMMANDS_H
#define TILEJIT_TOOLS_COMMANDS_H

/// `tilejit tune` (TuneCommand.cpp).
bool tuneCommandSelected();
int runTuneCommand();

/// `tilejit cache path|list|verify|clear` (CacheCommand.cpp).
bool cacheCommandSelected();
int runCacheCommand();

/// `tilejit bench` (BenchCommand.cpp).
bool benchCommandSelected();
int runBenchCommand();

#endif // TILEJIT_TOOLS_COMMANDS_H
