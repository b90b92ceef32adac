//===- TuningDatabase.cpp - tuned configs as JSON files -------------------===//
#include "runtime/TuningDatabase.h"

#include "runtime/Cache.h"
#include "runtime/FileIO.h"
#include "tilejit/Error.h"
#include "tilejit/Log.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"

#include <cstdio>

namespace tilejit {
namespace {

constexpr int64_t kFormat = 1;

llvm::json::Object keyJson(const TuningKey &k) {
  const DeviceIdentity &d = k.device;
  return llvm::json::Object{
      {"kernel", k.kernel},
      {"shape", k.shape},
      {"dtype", k.dtype},
      {"gpu", d.name},
      {"sm_count", d.smCount},
      {"compute_capability",
       std::to_string(d.ccMajor) + "." + std::to_string(d.ccMinor)},
      {"driver", d.driverVersion},
      {"tilejit", k.tilejitVersion},
      {"kernel_version", k.kernelVersion}};
}

llvm::json::Object paramsJson(const TuneParams &p) {
  llvm::json::Object o;
  for (const auto &[name, value] : p)
    o[name] = value;
  return o;
}

std::optional<TuneParams> paramsFrom(const llvm::json::Object *o) {
  if (!o)
    return std::nullopt;
  TuneParams p;
  for (const auto &[name, value] : *o) {
    std::optional<int64_t> v = value.getAsInteger();
    if (!v)
      return std::nullopt;
    p[name.str()] = *v;
  }
  return p;
}

llvm::json::Value trialJson(const Trial &t) {
  return llvm::json::Object{{"params", paramsJson(t.params)},
                            {"status", trialStatusName(t.status)},
                            {"detail", t.detail},
                            {"ms", t.ms},
                            {"compile_ms", t.compileMs},
                            {"threads", t.resources.threads},
                            {"registers", t.resources.registers},
                            {"shared_bytes", t.resources.sharedBytes}};
}

std::optional<Trial> trialFrom(const llvm::json::Value &v) {
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    return std::nullopt;
  Trial t;
  std::optional<TuneParams> p = paramsFrom(o->getObject("params"));
  std::optional<llvm::StringRef> status = o->getString("status");
  if (!p || !status || !parseTrialStatus(status->str(), t.status))
    return std::nullopt;
  t.params = *p;
  t.detail = o->getString("detail").value_or("").str();
  t.ms = o->getNumber("ms").value_or(0);
  t.compileMs = o->getNumber("compile_ms").value_or(0);
  t.resources.threads = o->getInteger("threads").value_or(0);
  t.resources.registers = o->getInteger("registers").value_or(0);
  t.resources.sharedBytes = o->getInteger("shared_bytes").value_or(0);
  return t;
}

/// Parses a stored entry; nullopt (with *why) when it is not one for `key`.
std::optional<TuningEntry> parseEntry(const std::string &text,
                                      const TuningKey &key, std::string *why) {
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) {
    *why = "not JSON: " + llvm::toString(v.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *o = v->getAsObject();
  if (!o || o->getInteger("format") != kFormat) {
    *why = "not a format-1 tuning entry";
    return std::nullopt;
  }
  const llvm::json::Object *k = o->getObject("key");
  if (!k || llvm::json::Value(llvm::json::Object(*k)) !=
                llvm::json::Value(keyJson(key))) {
    *why = "its key does not match";
    return std::nullopt;
  }
  TuningEntry e;
  // An empty 'best' is valid: a kernel may have no tuned parameter.
  std::optional<TuneParams> best = paramsFrom(o->getObject("best"));
  if (!best) {
    *why = "no valid 'best' config";
    return std::nullopt;
  }
  e.best = *best;
  if (const llvm::json::Array *trials = o->getArray("trials"))
    for (const llvm::json::Value &t : *trials)
      if (std::optional<Trial> trial = trialFrom(t))
        e.trials.push_back(*trial);
  return e;
}

} // namespace

std::string TuningKey::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(keyJson(*this)); // keys are printed sorted
  return s;
}

TuningDatabase::TuningDatabase(std::filesystem::path dir)
    : Dir(std::move(dir)) {}

TuningDatabase TuningDatabase::fromEnvironment() {
  if (!cacheEnabled())
    return TuningDatabase({});
  return TuningDatabase(cacheDirectory() / "tuning");
}

std::filesystem::path TuningDatabase::pathFor(const TuningKey &key) const {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                (unsigned long long)llvm::xxh3_64bits(key.str()));
  return Dir / (key.kernel + "-" + hash + ".json");
}

std::optional<TuningEntry> TuningDatabase::lookup(const TuningKey &key) const {
  if (!enabled())
    return std::nullopt;
  std::filesystem::path path = pathFor(key);
  std::string text;
  if (!readFile(path, text))
    return std::nullopt;
  std::string why;
  std::optional<TuningEntry> e = parseEntry(text, key, &why);
  if (!e)
    log()->warn("ignoring tuning entry {}: {}; it will be re-tuned",
                path.string(), why);
  return e;
}

bool TuningDatabase::store(const TuningKey &key,
                           const TuningEntry &entry) const {
  if (!enabled())
    return false;
  llvm::json::Array trials;
  for (const Trial &t : entry.trials)
    trials.push_back(trialJson(t));
  llvm::json::Value doc = llvm::json::Object{{"format", kFormat},
                                             {"key", keyJson(key)},
                                             {"best", paramsJson(entry.best)},
                                             {"trials", std::move(trials)}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::formatv("{0:2}", doc) << "\n";

  // Same-directory temp file and rename, as the kernel cache's aliases.
  std::filesystem::path path = pathFor(key);
  std::filesystem::path temp = uniqueName(path.string() + ".tmp");
  std::error_code ec;
  std::string problem;
  std::filesystem::create_directories(Dir, ec);
  if (ec)
    problem = ec.message();
  else if (writeFile(temp, text, &problem)) {
    std::filesystem::rename(temp, path, ec);
    if (ec)
      problem = ec.message();
  }
  if (problem.empty())
    return true;
  std::filesystem::remove(temp, ec);
  log()->warn("cannot store tuning entry {}: {}", path.string(), problem);
  return false;
}

TuningEntry lookupOrTune(const TuningDatabase &db, const TuningKey &key,
                         const std::function<TuneResult()> &tune, bool retune,
                         bool *fromDatabase) {
  std::optional<TuningEntry> e;
  if (!retune && (e = db.lookup(key))) {
    if (fromDatabase)
      *fromDatabase = true;
    return *e;
  }
  if (fromDatabase)
    *fromDatabase = false;
  TuneResult r = tune();
  if (!r.best()) {
    std::string why;
    for (const Trial &t : r.trials)
      why += "\n  " + formatParams(t.params) + ": " + t.statusText();
    throw Error("autotuning " + key.kernel + " (" + key.shape + ", " +
                key.dtype + "): no candidate passed" + why);
  }
  TuningEntry tuned{r.best()->params, r.trials};
  db.store(key, tuned);
  return tuned;
}

} // namespace tilejit
