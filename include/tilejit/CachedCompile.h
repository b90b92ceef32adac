//===- CachedCompile.h - compile() through the kernel cache -----*- C++ -*-===//
//
// The runtime's service over the compiler: a kernel compiled before, in
// this process or in another one, comes from the cache (runtime/Cache.h)
// instead of MLIR and NVRTC. The key's fields are listed in
// runtime/CachedCompile.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_CACHEDCOMPILE_H
#define TILEJIT_CACHEDCOMPILE_H

#include "tilejit/Compiler.h"

#include <map>
#include <memory>
#include <string>

namespace tilejit {

class KernelCache;

/// compile() through the kernel cache (runtime/Cache.h): a kernel compiled
/// before, in this process or (unless TILEJIT_CACHE=0) in another one with
/// the same key, is returned without compiling. Stages before Ptx are not
/// cached (they cost no NVRTC); Ptx and Cubin requests both get the whole
/// entry. A failed compile throws as compile() does and stores nothing.
CompiledKernel compileCached(const TileModule &module,
                             const CompileOptions &options);
/// The same with an explicit cache, returning the cached object itself (no
/// copy: this is the microsecond path for a kernel already in memory).
std::shared_ptr<const CompiledKernel>
compileCached(const TileModule &module, const CompileOptions &options,
              KernelCache &cache);
/// The key compileCached() uses for `module` and `options` (64 hex digits):
/// a hash over the optimized tile IR and everything else that can change the
/// binary (runtime/CachedCompile.cpp lists it). `fields` (if given)
/// receives the named parts that were hashed.
std::string
kernelCacheKey(const TileModule &module, const CompileOptions &options,
               std::map<std::string, std::string> *fields = nullptr);

} // namespace tilejit

#endif // TILEJIT_CACHEDCOMPILE_H
