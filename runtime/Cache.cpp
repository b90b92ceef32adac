//===- Cache.cpp - the on-disk and in-process kernel cache ----------------===//
//
// The format and the concurrency rules are described in Cache.h. Hashing,
// JSON and file locking come from LLVM's support library.
//
//===----------------------------------------------------------------------===//
#include "runtime/Cache.h"

#include "runtime/FileIO.h"
#include "tilejit/Error.h"
#include "tilejit/Log.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELF.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tilejit {

//===----------------------------------------------------------------------===//
// Location and settings
//===----------------------------------------------------------------------===//

static std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

fs::path cacheDirectory() {
  if (std::string dir = env("TILEJIT_CACHE_DIR"); !dir.empty())
    return dir;
  // The XDG spec says relative values are invalid and must be ignored.
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/')
    return fs::path(xdg) / "tilejit";
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd *pw = getpwuid(getuid()); pw && pw->pw_dir)
      home = pw->pw_dir;
  if (home.empty()) // no home at all (some containers): per-user temp dir
    return fs::temp_directory_path() /
           ("tilejit-cache-" + std::to_string(getuid()));
  return fs::path(home) / ".cache" / "tilejit";
}

bool cacheEnabled() {
  std::string v = llvm::StringRef(env("TILEJIT_CACHE")).trim().lower();
  return !(v == "0" || v == "false" || v == "off" || v == "no");
}

uint64_t cacheMaxBytes() {
  const uint64_t kDefault = uint64_t(1) << 30;
  llvm::StringRef v = llvm::StringRef(env("TILEJIT_CACHE_MAX_BYTES")).trim();
  if (v.empty())
    return kDefault;
  uint64_t scale = 1;
  switch (llvm::toUpper(v.back())) {
  case 'K':
    scale = uint64_t(1) << 10;
    break;
  case 'M':
    scale = uint64_t(1) << 20;
    break;
  case 'G':
    scale = uint64_t(1) << 30;
    break;
  }
  if (scale != 1)
    v = v.drop_back();
  uint64_t n = 0;
  if (v.getAsInteger(10, n) || n > UINT64_MAX / scale) {
    log()->warn("TILEJIT_CACHE_MAX_BYTES='{}' is not a size; using 1 GiB",
                env("TILEJIT_CACHE_MAX_BYTES"));
    return kDefault;
  }
  return n * scale;
}

//===----------------------------------------------------------------------===//
// Keys
//===----------------------------------------------------------------------===//

static std::string blake3Hex(llvm::StringRef data) {
  auto digest = llvm::BLAKE3::hash<32>(llvm::arrayRefFromStringRef(data));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

CacheKey &CacheKey::add(const std::string &name, const std::string &value) {
  if (!Fields.emplace(name, value).second)
    throw Error("cache key field '" + name + "' added twice");
  return *this;
}

CacheKey &CacheKey::add(const std::string &name, int64_t value) {
  return add(name, std::to_string(value));
}

std::string CacheKey::canonical() const {
  // "<len>:<name> <len>:<value>\n" per field, in name order: lengths make the
  // encoding unambiguous whatever bytes the values hold.
  std::string out = "tilejit-cache-key-v1\n";
  for (const auto &[name, value] : Fields)
    out += std::to_string(name.size()) + ":" + name + " " +
           std::to_string(value.size()) + ":" + value + "\n";
  return out;
}

std::string CacheKey::hex() const { return blake3Hex(canonical()); }

//===----------------------------------------------------------------------===//
// Entry files
//===----------------------------------------------------------------------===//

namespace {

// meta.json's format; an entry of another is a miss. 2: dynamic_shared_bytes,
// in the checksum too; 3: a persistent flag, also there; 4: without it, and
// the request digest, also in the checksum; 5: split_rows, also there.
constexpr int kFormat = 5;
const char *const kMeta = "meta.json";
const char *const kTmpPrefix = ".tmp-";
const char *const kTrashPrefix = ".trash-";
constexpr auto kStaleTemp = std::chrono::minutes(10);

/// The payload files of an entry, in checksum order, and where each lives in
/// a CompiledKernel.
struct PayloadFile {
  const char *name;
  std::string CompiledKernel::*text;
};
const PayloadFile kTextFiles[] = {{"tile.mlir", &CompiledKernel::tileIR},
                                  {"simt.mlir", &CompiledKernel::simtIR},
                                  {"kernel.cu", &CompiledKernel::cuda},
                                  {"kernel.ptx", &CompiledKernel::ptx}};
const char *const kCubin = "kernel.cubin";

/// (name, bytes) of every payload file, in checksum order.
std::vector<std::pair<std::string, llvm::StringRef>>
payload(const CompiledKernel &k) {
  std::vector<std::pair<std::string, llvm::StringRef>> files;
  for (const PayloadFile &f : kTextFiles)
    files.emplace_back(f.name, k.*f.text);
  files.emplace_back(kCubin, llvm::StringRef(k.cubin.data(), k.cubin.size()));
  return files;
}

/// One checksum over the whole entry: its key, the kernel name, thread
/// count, cluster size, shared bytes and request digest that meta.json
/// records, then name, size and bytes of each file.
std::string entryChecksum(const std::string &key, const CompiledKernel &k) {
  llvm::BLAKE3 h;
  h.update(key + ":" + k.name + ":" + std::to_string(k.threads) + ":" +
           std::to_string(k.clusterSize) + ":" +
           std::to_string(k.splitRows) + ":" +
           std::to_string(k.dynamicSharedBytes) + ":" + k.requestDigest + ":" +
           (k.resident ? "resident:" : ""));
  for (const TensorMapParam &m : k.tensorMaps)
    for (int64_t f : flattenTensorMap(m))
      h.update(std::to_string(f) + ",");
  for (const auto &[name, bytes] : payload(k)) {
    h.update(name + ":" + std::to_string(bytes.size()) + ":");
    h.update(bytes);
  }
  return llvm::toHex(h.final<32>(), /*LowerCase=*/true);
}

/// Resource usage of `kernel` read from a CUBIN's .nv.info records (the
/// same numbers `ptxas -v` prints): EIATTR_REGCOUNT (0x2f) and
/// EIATTR_FRAME_SIZE (0x11) as {symbol index, value}; shared_section_bytes
/// is the size of .nv.shared.<kernel>, which on sm_90 includes 1 KiB that
/// the toolchain reserves once a kernel uses shared memory (ptxas -v prints
/// the size without it, e.g. 256 bytes smem for a 1280-byte section). Records
/// are {u8 format, u8 attribute, payload}: format 4 (EIFMT_SVAL) has a u16 size
/// and that many bytes, the others a fixed 2-byte payload. Empty object when
/// anything is unexpected: this is information for people, not something the
/// cache relies on.
llvm::json::Object cubinResources(const std::vector<char> &cubin,
                                  const std::string &kernel) {
  using ELF = llvm::object::ELF64LEFile;
  llvm::json::Object out;
  auto elf = ELF::create(llvm::StringRef(cubin.data(), cubin.size()));
  if (!elf) {
    llvm::consumeError(elf.takeError());
    return out;
  }
  auto sections = elf->sections();
  if (!sections) {
    llvm::consumeError(sections.takeError());
    return out;
  }
  // The kernel's symbol index, from the symbol table.
  int64_t symbol = -1;
  for (const auto &sec : *sections) {
    if (sec.sh_type != llvm::ELF::SHT_SYMTAB)
      continue;
    auto syms = elf->symbols(&sec);
    auto names = elf->getStringTableForSymtab(sec);
    if (!syms || !names) {
      llvm::consumeError(syms.takeError());
      llvm::consumeError(names.takeError());
      return out;
    }
    for (size_t i = 0; i < syms->size(); ++i) {
      auto name = (*syms)[i].getName(*names);
      if (name && *name == kernel)
        symbol = i;
      else if (!name)
        llvm::consumeError(name.takeError());
    }
  }
  for (const auto &sec : *sections) {
    auto name = elf->getSectionName(sec);
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".nv.shared." + kernel)
      out["shared_section_bytes"] = int64_t(sec.sh_size);
    if (*name != ".nv.info")
      continue;
    auto bytes = elf->getSectionContents(sec);
    if (!bytes) {
      llvm::consumeError(bytes.takeError());
      continue;
    }
    llvm::ArrayRef<uint8_t> b = *bytes;
    auto u16 = [&](size_t i) {
      return uint32_t(b[i]) | uint32_t(b[i + 1]) << 8;
    };
    auto u32 = [&](size_t i) { return u16(i) | u16(i + 2) << 16; };
    for (size_t i = 0; i + 4 <= b.size();) {
      uint8_t format = b[i], attr = b[i + 1];
      size_t size = format == 4 ? u16(i + 2) : 0;
      size_t payload = i + 4;
      if (payload + size > b.size())
        break;
      if (format == 4 && size == 8 && u32(payload) == uint32_t(symbol)) {
        if (attr == 0x2f)
          out["registers"] = int64_t(u32(payload + 4));
        else if (attr == 0x11)
          out["stack_bytes"] = int64_t(u32(payload + 4));
      }
      i = payload + size;
    }
  }
  if (out.get("registers") && !out.get("shared_section_bytes"))
    out["shared_section_bytes"] = 0;
  return out;
}

int64_t mtimeNs(const fs::path &p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0)
    return 0;
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Marks an entry as just used (its meta.json's mtime = now).
void touch(const fs::path &p) {
  if (::utimensat(AT_FDCWD, p.c_str(), nullptr, 0) != 0)
    log()->debug("cache: cannot touch {}: {}", p.string(), strerror(errno));
}

/// Removes an entry directory: first an atomic rename out of the way (so a
/// reader sees the whole entry or nothing, and two removers never race on
/// the same files), then the recursive removal. Failures are only logged.
/// True when the entry is gone from its key (renamed to trash, or already
/// gone); false, with the reason logged, when it could not be moved.
bool removeEntry(const fs::path &entry) {
  std::error_code ec;
  fs::path trash = entry.parent_path() /
                   uniqueName(kTrashPrefix + entry.filename().string());
  fs::rename(entry, trash, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory)
      return true;
    log()->debug("cache: cannot remove {}: {}", entry.string(), ec.message());
    return false;
  }
  fs::remove_all(trash, ec);
  if (ec)
    log()->debug("cache: cannot remove {}: {}", trash.string(), ec.message());
  return true;
}

bool isKey(llvm::StringRef name) {
  return name.size() == 64 &&
         llvm::all_of(name, [](char c) { return llvm::isHexDigit(c); });
}

/// Reads and checks one entry. On success fills *kernel (if given) and
/// returns an empty string; otherwise returns what is wrong with it.
std::string readEntry(const fs::path &entry, const std::string &key,
                      CompiledKernel *kernel, CacheEntryInfo *info,
                      bool checkContents) {
  std::string metaText;
  if (!readFile(entry / kMeta, metaText))
    return "meta.json is missing or unreadable";
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(metaText);
  if (!parsed)
    return "meta.json is not JSON (" + llvm::toString(parsed.takeError()) + ")";
  const llvm::json::Object *meta = parsed->getAsObject();
  if (!meta)
    return "meta.json is not an object";
  auto str = [&](llvm::StringRef k) {
    return meta->getString(k).value_or("").str();
  };
  if (info) {
    info->kernel = str("kernel");
    info->arch = str("arch");
    info->requestDigest = str("request_digest");
  }
  if (meta->getInteger("format") != kFormat)
    return "format is not " + std::to_string(kFormat);
  if (str("key") != key)
    return "meta.json belongs to another entry (key " +
           str("key").substr(0, 16) + "...)";
  const llvm::json::Object *sizes = meta->getObject("files");
  if (!sizes)
    return "meta.json lists no files";
  uint64_t total = 0;
  for (const auto &kv : *sizes)
    total += kv.second.getAsInteger().value_or(0);
  if (info)
    info->bytes = total + metaText.size();
  if (!checkContents)
    return "";

  CompiledKernel k;
  k.name = str("kernel");
  k.threads = meta->getInteger("threads").value_or(0);
  k.clusterSize = meta->getInteger("cluster_size").value_or(0);
  k.splitRows = meta->getInteger("split_rows").value_or(0);
  k.dynamicSharedBytes = meta->getInteger("dynamic_shared_bytes").value_or(0);
  k.resident = meta->getBoolean("resident").value_or(false);
  k.requestDigest = str("request_digest");
  if (const llvm::json::Array *maps = meta->getArray("tensor_maps"))
    for (const llvm::json::Value &m : *maps) {
      std::vector<int64_t> fields;
      if (const llvm::json::Array *a = m.getAsArray())
        for (const llvm::json::Value &f : *a)
          fields.push_back(f.getAsInteger().value_or(-1));
      if (!unflattenTensorMap(fields, k.tensorMaps.emplace_back()))
        return "meta.json's tensor_maps are not maps a launch can encode";
    }
  for (const PayloadFile &f : kTextFiles)
    if (!readFile(entry / f.name, k.*f.text))
      return std::string(f.name) + " is missing or unreadable";
  std::string cubin;
  if (!readFile(entry / kCubin, cubin))
    return std::string(kCubin) + " is missing or unreadable";
  k.cubin.assign(cubin.begin(), cubin.end());
  for (const auto &[name, bytes] : payload(k)) {
    std::optional<int64_t> want = sizes->getInteger(name);
    if (!want || uint64_t(*want) != bytes.size())
      return name + " has " + std::to_string(bytes.size()) +
             " bytes, meta.json says " +
             (want ? std::to_string(*want) : std::string("nothing"));
  }
  if (entryChecksum(key, k) != str("checksum"))
    return "checksum mismatch";
  if (k.name.empty() || k.threads <= 0 || k.clusterSize <= 0 ||
      k.splitRows <= 0)
    return "meta.json lacks the kernel name, thread count, cluster size or "
           "split rows";
  if (kernel)
    *kernel = std::move(k);
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// KernelCache
//===----------------------------------------------------------------------===//

KernelCache::KernelCache(fs::path dir, bool useDisk, uint64_t maxBytes)
    : Dir(std::move(dir)), UseDisk(useDisk && !Dir.empty()),
      MaxBytes(maxBytes) {}

std::unique_ptr<KernelCache> KernelCache::fromEnvironment() {
  return std::make_unique<KernelCache>(cacheDirectory(), cacheEnabled(),
                                       cacheMaxBytes());
}

KernelCache &KernelCache::global() {
  static std::unique_ptr<KernelCache> cache = fromEnvironment();
  return *cache;
}

std::shared_ptr<const CompiledKernel>
KernelCache::lookup(const std::string &key) {
  {
    std::lock_guard<std::mutex> lock(Mutex);
    auto it = Memory.find(key);
    if (it != Memory.end())
      return it->second;
  }
  if (!UseDisk)
    return nullptr;
  auto k = loadFromDisk(key);
  if (k) {
    std::lock_guard<std::mutex> lock(Mutex);
    Memory.emplace(key, k);
  }
  return k;
}

std::shared_ptr<const CompiledKernel>
KernelCache::loadFromDisk(const std::string &key) {
  fs::path entry = kernelsDirectory() / key;
  std::error_code ec;
  if (!fs::is_directory(entry, ec))
    return nullptr;
  auto k = std::make_shared<CompiledKernel>();
  std::string problem = readEntry(entry, key, k.get(), nullptr, true);
  if (!problem.empty()) {
    log()->warn("cache: dropping damaged entry {} ({}); recompiling",
                entry.string(), problem);
    removeEntry(entry);
    return nullptr;
  }
  k->cacheKey = key;
  touch(entry / kMeta);
  return k;
}

std::shared_ptr<const CompiledKernel>
KernelCache::store(const std::string &key, CompiledKernel kernel,
                   const std::map<std::string, std::string> &keyFields,
                   const std::vector<std::string> &params) {
  auto k = std::make_shared<const CompiledKernel>(std::move(kernel));
  if (writable())
    publish(key, *k, keyFields, params);
  std::lock_guard<std::mutex> lock(Mutex);
  Memory[key] = k;
  return k;
}

void KernelCache::disableWrites(const std::string &why) {
  if (Writable.exchange(false))
    log()->warn("cache: {}; caching compiled kernels in memory only for the "
                "rest of this process (set TILEJIT_CACHE_DIR to a writable "
                "directory, or TILEJIT_CACHE=0 to silence this)",
                why);
}

void KernelCache::publish(const std::string &key, const CompiledKernel &k,
                          const std::map<std::string, std::string> &keyFields,
                          const std::vector<std::string> &params) {
  fs::path kernels = kernelsDirectory();
  std::error_code ec;
  fs::create_directories(kernels, ec);
  if (ec)
    return disableWrites("cannot create " + kernels.string() + ": " +
                         ec.message());
  fs::path tmp = kernels / uniqueName(kTmpPrefix + key);
  if (!fs::create_directory(tmp, ec))
    return disableWrites("cannot create " + tmp.string() + ": " +
                         (ec ? ec.message() : "it exists"));

  llvm::json::Object sizes, fields;
  for (const auto &[name, bytes] : payload(k))
    sizes[name] = int64_t(bytes.size());
  for (const auto &[name, value] : keyFields)
    fields[name] = value.size() <= 200
                       ? value
                       : "(" + std::to_string(value.size()) +
                             " bytes, BLAKE3 " + blake3Hex(value) + ")";
  auto field = [&](const char *name) {
    auto it = keyFields.find(name);
    return it == keyFields.end() ? std::string() : it->second;
  };
  llvm::json::Array maps;
  for (const TensorMapParam &m : k.tensorMaps)
    maps.push_back(llvm::json::Array(flattenTensorMap(m)));
  llvm::json::Object meta{
      {"format", kFormat},
      {"key", key},
      {"kernel", k.name},
      {"params", llvm::json::Array(params)},
      {"arch", field("arch")},
      {"tilejit_version", TILEJIT_VERSION},
      {"nvrtc_version", field("nvrtc_version")},
      {"threads", k.threads},
      {"cluster_size", k.clusterSize},
      {"split_rows", k.splitRows},
      {"dynamic_shared_bytes", k.dynamicSharedBytes},
      {"resident", k.resident},
      {"tensor_maps", std::move(maps)},
      {"request_digest", k.requestDigest},
      {"resources", cubinResources(k.cubin, k.name)},
      {"compile_us", llvm::json::Object{{"mlir", int64_t(k.mlirMs * 1000)},
                                        {"nvrtc", int64_t(k.nvrtcMs * 1000)}}},
      {"files", std::move(sizes)},
      {"checksum", entryChecksum(key, k)},
      {"key_fields", std::move(fields)},
  };
  std::string metaText;
  llvm::raw_string_ostream os(metaText);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(meta))) << "\n";

  std::string why;
  bool ok = true;
  for (const auto &[name, bytes] : payload(k))
    ok = ok && writeFile(tmp / name, bytes, &why);
  ok = ok && writeFile(tmp / kMeta, metaText, &why); // last: marks complete
  if (!ok) {
    fs::remove_all(tmp, ec);
    return disableWrites(why);
  }
  if (beforePublishForTesting)
    beforePublishForTesting(tmp);

  fs::path entry = kernels / key;
  fs::rename(tmp, entry, ec);
  if (ec) {
    bool lostRace = fs::is_directory(entry);
    std::error_code rmEc;
    fs::remove_all(tmp, rmEc);
    if (rmEc)
      log()->debug("cache: cannot remove {}: {}", tmp.string(), rmEc.message());
    if (lostRace) {
      log()->debug("cache: {} was published by another process", key);
      return;
    }
    return disableWrites("cannot publish " + entry.string() + ": " +
                         ec.message());
  }
  log()->debug("cache: stored {} ({}) in {}", k.name, key.substr(0, 16),
               entry.string());
  evict(key);
}

namespace {

/// An alias file: the key on the first line, the request digest of the
/// entry it was made for on the second. False if it is anything else.
bool parseAlias(llvm::StringRef text, std::string &key, std::string &request) {
  auto [first, rest] = text.split('\n');
  auto [second, tail] = rest.split('\n');
  key = first.str();
  request = second.str();
  return isKey(key) && isKey(request) && tail.trim().empty();
}

} // namespace

std::string KernelCache::findAlias(const std::string &alias) {
  {
    std::lock_guard<std::mutex> lock(Mutex);
    auto it = Aliases.find(alias);
    if (it != Aliases.end())
      return it->second;
  }
  std::string text, key, request;
  if (!UseDisk || !readFile(Dir / "aliases" / alias, text) ||
      !parseAlias(text, key, request))
    return "";
  std::lock_guard<std::mutex> lock(Mutex);
  Aliases.emplace(alias, key);
  return key;
}

void KernelCache::storeAlias(const std::string &alias, const std::string &key,
                             const std::string &requestDigest) {
  {
    std::lock_guard<std::mutex> lock(Mutex);
    Aliases[alias] = key;
  }
  if (!writable())
    return;
  fs::path dir = Dir / "aliases";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return disableWrites("cannot create " + dir.string() + ": " + ec.message());
  // Same-directory temp file and rename: readers never see half a key.
  fs::path tmp = dir / uniqueName(kTmpPrefix + alias);
  std::string why;
  if (!writeFile(tmp, key + "\n" + requestDigest + "\n", &why)) {
    fs::remove(tmp, ec);
    return disableWrites(why);
  }
  fs::rename(tmp, dir / alias, ec);
  if (ec) {
    fs::remove(tmp, ec);
    log()->debug("cache: cannot publish alias {}", alias);
  }
}

std::vector<CacheEntryInfo> KernelCache::list(bool checkContents) const {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (fs::directory_iterator it(kernelsDirectory(), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename();
    if (!isKey(name) || !it->is_directory(ec))
      continue;
    CacheEntryInfo info;
    info.key = name;
    info.path = it->path();
    info.lastUseNs = mtimeNs(it->path() / kMeta);
    info.problem = readEntry(it->path(), name, nullptr, &info, checkContents);
    info.valid = info.problem.empty();
    if (!info.valid) { // size from the files themselves
      info.bytes = 0;
      for (fs::directory_iterator f(it->path(), ec), fe; !ec && f != fe;
           f.increment(ec))
        info.bytes += f->is_regular_file(ec) ? f->file_size(ec) : 0;
      ec.clear();
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.lastUseNs < b.lastUseNs;
  });
  return out;
}

std::vector<CacheEntryInfo> KernelCache::verifyAndDrop() {
  std::vector<CacheEntryInfo> entries = list(/*checkContents=*/true);
  for (const CacheEntryInfo &e : entries)
    if (!e.valid) {
      removeEntry(e.path);
      std::lock_guard<std::mutex> lock(Mutex);
      Memory.erase(e.key);
    }
  return entries;
}

std::vector<CacheAliasInfo> KernelCache::verifyAliases() {
  std::map<std::string, CacheEntryInfo> entries;
  for (CacheEntryInfo &e : list(/*checkContents=*/true))
    entries.emplace(e.key, std::move(e));
  std::vector<CacheAliasInfo> out;
  std::error_code ec;
  for (fs::directory_iterator it(Dir / "aliases", ec), end; !ec && it != end;
       it.increment(ec)) {
    CacheAliasInfo a;
    a.alias = it->path().filename().string();
    if (llvm::StringRef(a.alias).starts_with(kTmpPrefix))
      continue; // a writer's, or cleaned up by evict()
    std::string text, request;
    auto entry = entries.end();
    if (!readFile(it->path(), text) || !parseAlias(text, a.key, request))
      a.problem = "not a key and a request digest";
    else if ((entry = entries.find(a.key)) == entries.end())
      a.problem = "names no entry";
    else if (!entry->second.valid)
      a.problem = "names a damaged entry";
    else if (entry->second.requestDigest != request)
      a.problem = "names an entry built for another request (" +
                  entry->second.kernel + ")";
    a.valid = a.problem.empty();
    if (!a.valid) {
      std::error_code rmEc;
      fs::remove(it->path(), rmEc);
      std::lock_guard<std::mutex> lock(Mutex);
      Aliases.erase(a.alias);
    }
    out.push_back(std::move(a));
  }
  return out;
}

size_t KernelCache::clear() {
  size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> victims;
  for (fs::directory_iterator it(kernelsDirectory(), ec), end; !ec && it != end;
       it.increment(ec))
    if (it->is_directory(ec))
      victims.push_back(it->path());
  // Leftovers of killed writers and failed removals go too, uncounted.
  size_t kept = 0;
  for (const fs::path &p : victims) {
    bool gone = removeEntry(p);
    if (isKey(p.filename().string()))
      ++(gone ? removed : kept);
  }
  if (kept)
    log()->warn("cache: {} entries in {} could not be removed (permissions?)",
                kept, kernelsDirectory().string());
  fs::remove_all(Dir / "aliases", ec);
  dropMemory();
  return removed;
}

void KernelCache::dropMemory() {
  std::lock_guard<std::mutex> lock(Mutex);
  Memory.clear();
  Aliases.clear();
}

void KernelCache::evict(const std::string &keep) {
  if (!UseDisk || MaxBytes == 0)
    return;
  fs::path kernels = kernelsDirectory();
  std::string lockPath = (kernels / ".evict.lock").string();
  int fd = -1;
  if (llvm::sys::fs::openFileForWrite(lockPath, fd,
                                      llvm::sys::fs::CD_OpenAlways))
    return;
  if (llvm::sys::fs::tryLockFile(fd, std::chrono::milliseconds(0))) {
    ::close(fd); // another process is evicting
    return;
  }
  // Leftovers of killed writers and removers.
  std::error_code ec;
  int64_t staleBefore = nowNs() - std::chrono::nanoseconds(kStaleTemp).count();
  for (fs::directory_iterator it(kernels, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string nameStr = it->path().filename().string();
    llvm::StringRef name = nameStr;
    if ((name.starts_with(kTmpPrefix) || name.starts_with(kTrashPrefix)) &&
        mtimeNs(it->path()) < staleBefore) {
      std::error_code rmEc;
      fs::remove_all(it->path(), rmEc);
    }
  }
  std::vector<CacheEntryInfo> entries = list(/*checkContents=*/false);
  uint64_t total = 0;
  for (const CacheEntryInfo &e : entries)
    total += e.bytes;
  for (const CacheEntryInfo &e : entries) { // oldest use first
    if (total <= MaxBytes)
      break;
    if (e.key == keep)
      continue;
    log()->debug("cache: evicting {} ({}, {} bytes)", e.key.substr(0, 16),
                 e.kernel, e.bytes);
    removeEntry(e.path);
    total -= e.bytes;
  }
  // Aliases of entries that are gone (evicted or dropped) point nowhere.
  for (fs::directory_iterator it(Dir / "aliases", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string text, key, request;
    std::string nameStr = it->path().filename().string();
    llvm::StringRef name = nameStr;
    bool stale = name.starts_with(kTmpPrefix)
                     ? mtimeNs(it->path()) < staleBefore
                     : readFile(it->path(), text) &&
                           (!parseAlias(text, key, request) ||
                            !fs::exists(kernels / key));
    if (stale) {
      std::error_code rmEc;
      fs::remove(it->path(), rmEc);
    }
  }
  llvm::sys::fs::unlockFile(fd);
  ::close(fd);
}

//===----------------------------------------------------------------------===//
// LoadedKernels
//===----------------------------------------------------------------------===//

cuda::Module loadModule(const CompiledKernel &kernel) {
  return kernel.cubin.empty() ? cuda::Module::fromPtx(kernel.ptx)
                              : cuda::Module::fromCubin(kernel.cubin);
}

cuda::Function entryPoint(const cuda::Module &module,
                          const CompiledKernel &kernel) {
  cuda::Function fn = module.function(kernel.name);
  if (kernel.clusterSize > 8)
    fn.allowNonPortableClusterSize();
  return fn;
}

const cuda::Function &LoadedKernels::function(const CompiledKernel &kernel) {
  std::string key = kernel.cacheKey;
  if (key.empty())
    key = blake3Hex(kernel.name + "\n" + kernel.ptx + "\n" +
                    std::string(kernel.cubin.begin(), kernel.cubin.end()));
  std::lock_guard<std::mutex> lock(Mutex);
  std::unique_ptr<Loaded> &slot = Map[key];
  if (!slot) {
    auto loaded = std::make_unique<Loaded>(loadModule(kernel));
    loaded->function = entryPoint(loaded->module, kernel);
    slot = std::move(loaded);
  }
  return slot->function;
}

} // namespace tilejit
