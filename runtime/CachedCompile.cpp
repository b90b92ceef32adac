//===- CachedCompile.cpp - compile() through the kernel cache -------------===//
//
// The key covers everything that can change the binary, each as a named
// field of a CacheKey:
//   tile_ir          the tile IR after optimizeTile(): specialized, with
//                    constants folded, so DSL programs that build the same
//                    kernel share it. MLIR prints no addresses; SSA names and
//                    attribute dictionaries are printed in a fixed order, and
//                    locations are off, so the text is the same in every
//                    process (a test checks this across two processes).
//   kernel_attrs     the kernel's attribute dictionary before optimizing:
//                    tile.num_warps, tile.constexprs and anything added later
//   num_warps, constexpr.<NAME>   the same values again, one field each, so
//                    meta.json shows them
//   signature        the parameter types (the dtypes)
//   arch             the full target, e.g. sm_90 vs sm_90a vs compute_90
//   nvrtc_version, nvrtc_options   the compiler and the extra options
//   mlir_version     the MLIR/LLVM release the passes come from
//   tilejit_version  TILEJIT_VERSION, and source_hash: a hash of the
//                    compiler's own sources made at build time (the passes
//                    below the tile level and the emitter change the binary
//                    without changing tile_ir; a development build must not
//                    reuse a binary from before an edit)
// Not in the key: the driver version. The entry holds what NVRTC produced,
// which no driver changes; a CUBIN is loaded as is, and PTX (compute_XX
// targets) is JIT-compiled by the driver at load time into the driver's own
// cache, which is keyed on the driver. The threads per block follow from
// num_warps in the pipeline and are stored in the entry.
//
// Finding an entry without running the tile-level passes: each key also has
// an alias, the same fields hashed with the unoptimized IR instead, kept in
// memory and on disk (KernelCache::findAlias). A hit by alias costs printing
// the module, three hashes and reading the entry. An alias is only a hint:
// the entry it names must have been built for the same request (the same
// fields but the tile IR, compared as requestDigest()), or it is ignored, the
// key computed and the alias rewritten.
//
//===----------------------------------------------------------------------===//
#include "tilejit/CachedCompile.h"

#include "codegen/Nvrtc.h"
#include "runtime/Cache.h"
#include "runtime/FileIO.h"
#include "tilejit/Error.h"
#include "tilejit/Log.h"
#include "tilejit/Timing.h"
#include "tilejit/ir/Dialects.h"
#include "tilejit/ir/TileModuleImpl.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>

using namespace mlir;

namespace tilejit {
namespace {

template <typename T> std::string print(const T &x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << x;
  return s;
}

struct KeyParts {
  CacheKey key;
  std::vector<std::string> params;
};

func::FuncOp kernelFunc(const TileModule &m) {
  func::FuncOp kernel;
  m.impl().module->walk([&](func::FuncOp f) {
    if (f->hasAttr(attr::kKernel) || !kernel)
      kernel = f;
  });
  return kernel;
}

std::string optionsText(const CompileOptions &options) {
  llvm::json::Array opts;
  for (const std::string &o : options.nvrtcOptions)
    opts.push_back(o);
  return print(llvm::json::Value(std::move(opts)));
}

/// The key's fields for `input`, with `tileIR` as the IR (the optimized IR
/// for the key, the unoptimized one for its alias). Each print costs ~10 us,
/// so the signature is printed once and parameters split only on request.
KeyParts keyParts(const TileModule &input, const CompileOptions &options,
                  const std::string &tileIR, bool wantParams = false) {
  KeyParts p;
  CacheKey &k = p.key;
  k.add("tile_ir", tileIR);
  k.add("kernel", input.kernelName());
  if (func::FuncOp f = kernelFunc(input)) {
    k.add("kernel_attrs", print(f->getAttrDictionary()));
    if (auto w = f->getAttrOfType<IntegerAttr>(attr::kNumWarps))
      k.add("num_warps", w.getInt());
    if (auto c = f->getAttrOfType<DictionaryAttr>(attr::kConstexprs))
      for (NamedAttribute a : c) {
        auto i = dyn_cast<IntegerAttr>(a.getValue());
        k.add("constexpr." + a.getName().str(),
              i ? std::to_string(i.getInt()) : print(a.getValue()));
      }
    k.add("signature", print(f.getFunctionType()));
    if (wantParams)
      for (Type t : f.getArgumentTypes())
        p.params.push_back(print(t));
  }
  k.add("arch", options.arch);
  k.add("nvrtc_version", nvrtc::nvrtcVersion());
  k.add("nvrtc_options", optionsText(options));
  k.add("mlir_version", LLVM_VERSION_STRING);
  k.add("tilejit_version", TILEJIT_VERSION);
  k.add("source_hash", compilerSourceHash());
  return p;
}

/// BLAKE3 over `key`'s fields but the tile IR: what an entry found through
/// an alias must have been built for.
std::string requestDigest(const CacheKey &key) {
  CacheKey request;
  for (const auto &[name, value] : key.fields())
    if (name != "tile_ir" && name != "alias_of")
      request.add(name, value);
  return request.hex();
}

/// The key itself: keyParts() over the optimized tile IR (its "tile_ir").
KeyParts computeKey(const TileModule &module, const CompileOptions &options,
                    bool wantParams = false) {
  TileModule optimized = module.clone();
  optimizeTile(optimized);
  return keyParts(module, options, optimized.str(), wantParams);
}

/// The kernel cache first, then the pipeline: compileCached() but the dump.
std::shared_ptr<const CompiledKernel>
lookupOrCompile(const TileModule &module, const CompileOptions &options,
                KernelCache &cache);

/// TILEJIT_DUMP_DIR: writes every stage of `k` into
/// <dir>/<kernel>-<first 16 hex digits of the key>/. The cache entry holds
/// every stage but the IR as built, which `built` is, so a hit dumps the
/// same files as a compile; SASS is disassembled from the CUBIN when
/// cuobjdump or nvdisasm is there. Throws tilejit::Error when the directory
/// cannot be written: the caller asked for the files.
void dumpStages(const std::string &dir, const TileModule &built,
                const CompileOptions &options, const CompiledKernel &k) {
  std::string key =
      k.cacheKey.empty() ? kernelCacheKey(built, options) : k.cacheKey;
  std::filesystem::path out =
      std::filesystem::path(dir) / (k.name + "-" + key.substr(0, 16));
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec)
    throw Error("TILEJIT_DUMP_DIR: cannot create " + out.string() + ": " +
                ec.message());
  std::string sass;
  if (!k.cubin.empty()) {
    try {
      sass = nvrtc::disassembleCubin(k.cubin);
    } catch (const Error &e) {
      log()->debug("TILEJIT_DUMP_DIR: no SASS for {}: {}", k.name, e.what());
    }
  }
  std::string builtIR = built.str();
  const std::pair<const char *, llvm::StringRef> files[] = {
      {"0-built.mlir", builtIR},
      {"1-tile.mlir", k.tileIR},
      {"2-simt.mlir", k.simtIR},
      {"3-kernel.cu", k.cuda},
      {"4-kernel.ptx", k.ptx},
      {"5-kernel.cubin", llvm::StringRef(k.cubin.data(), k.cubin.size())},
      {"6-kernel.sass", sass}};
  for (auto [name, bytes] : files) {
    if (bytes.empty())
      continue; // a stage the request stopped before
    std::string why;
    if (!writeFile(out / name, bytes, &why))
      throw Error("TILEJIT_DUMP_DIR: " + why);
  }
  log()->info("dumped {} to {}", k.name, out.string());
}

} // namespace

std::shared_ptr<const CompiledKernel>
compileCached(const TileModule &module, const CompileOptions &options,
              KernelCache &cache) {
  std::shared_ptr<const CompiledKernel> k =
      lookupOrCompile(module, options, cache);
  if (const char *dir = std::getenv("TILEJIT_DUMP_DIR"); dir && *dir)
    dumpStages(dir, module, options, *k);
  return k;
}

std::string kernelCacheKey(const TileModule &module,
                           const CompileOptions &options,
                           std::map<std::string, std::string> *fields) {
  KeyParts p = computeKey(module, options);
  if (fields)
    *fields = p.key.fields();
  return p.key.hex();
}

namespace {

std::shared_ptr<const CompiledKernel>
lookupOrCompile(const TileModule &module, const CompileOptions &options,
                KernelCache &cache) {
  if (options.upTo < Stage::Ptx) // no NVRTC: not worth an entry
    return std::make_shared<const CompiledKernel>(compile(module, options));

  auto t0 = std::chrono::steady_clock::now();
  // The alias: the same fields with the unoptimized IR, for finding the key
  // without running the passes (they are deterministic, and their sources
  // are in the key: same input, same optimized IR).
  KeyParts aliasParts = keyParts(module, options, module.str());
  aliasParts.key.add("alias_of", "optimized tile_ir");
  std::string alias = aliasParts.key.hex();
  std::string request = requestDigest(aliasParts.key);
  std::string key = cache.findAlias(alias);
  if (!key.empty())
    if (auto hit = cache.lookup(key)) {
      if (hit->requestDigest == request) {
        log()->debug("cache hit {} {} (by alias): {:.3f} ms",
                     module.kernelName(), key.substr(0, 16), msSince(t0));
        return hit;
      }
      log()->warn("cache: alias {} of {} names an entry built for another "
                  "request ({} {}); ignoring it",
                  alias.substr(0, 16), module.kernelName(), hit->name,
                  key.substr(0, 16));
    }

  KeyParts parts = computeKey(module, options, /*wantParams=*/true);
  key = parts.key.hex();
  if (auto hit = cache.lookup(key)) {
    cache.storeAlias(alias, key, request);
    log()->debug("cache hit {} {}: {:.3f} ms", module.kernelName(),
                 key.substr(0, 16), msSince(t0));
    return hit;
  }
  log()->debug("cache miss {} {}", module.kernelName(), key.substr(0, 16));

  CompileOptions full = options;
  full.upTo = Stage::Cubin;
  CompiledKernel k = compile(module, full); // throws: nothing is stored
  if (k.tileIR != parts.key.fields().at("tile_ir")) {
    // The key would not describe this binary: never store it.
    log()->warn("cache: {} compiled to different tile IR twice in a row; not "
                "caching it (please report this)",
                k.name);
    return std::make_shared<const CompiledKernel>(std::move(k));
  }
  k.cacheKey = key;
  k.requestDigest = request;
  auto stored =
      cache.store(key, std::move(k), parts.key.fields(), parts.params);
  cache.storeAlias(alias, key, request); // after the entry, so it never dangles
  return stored;
}

} // namespace

CompiledKernel compileCached(const TileModule &module,
                             const CompileOptions &options) {
  return *compileCached(module, options, KernelCache::global());
}

} // namespace tilejit
