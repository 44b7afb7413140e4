// io/reader.cc — OpenReader's dispatch, the default IoOptions, the counters.
#include "io/reader.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/file.h"
#include "io/cache_reader.h"
#include "io/gzip_reader.h"
#include "io/hf.h"
#include "io/zstd_reader.h"
#include "io/http_reader.h"
#include "io/posix_reader.h"
#include "io/s3.h"
#include "io/url.h"

namespace stoker {

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::atoi(v);
}

}  // namespace

StorageOptions StorageOptionsFromEnvironment() {
  StorageOptions o;
  o.attempts = EnvInt("STOKER_IO_ATTEMPTS", o.attempts);
  o.timeout_ms = EnvInt("STOKER_IO_TIMEOUT_MS", o.timeout_ms);
  o.stall_ms = EnvInt("STOKER_IO_STALL_MS", o.stall_ms);
  o.backoff_ms = EnvInt("STOKER_IO_BACKOFF_MS", o.backoff_ms);
  o.backoff_max_ms = EnvInt("STOKER_IO_BACKOFF_MAX_MS", o.backoff_max_ms);
  if (const char* v = std::getenv("STOKER_IO_RETRY_DEADLINE_S"); v && *v) {
    o.retry_deadline_ms = static_cast<int>(std::strtod(v, nullptr) * 1000);
  }
  if (const char* v = std::getenv("STOKER_CACHE_DIR")) o.cache_dir = v;
  if (const char* v = std::getenv("STOKER_CACHE_BYTES"); v && *v) o.cache_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("HF_ENDPOINT"); v && *v) o.hf_endpoint = v;
  o.hf_token = HfTokenFromEnvironment();
  for (const char* name : {"STOKER_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      o.s3_endpoint = v;
      break;
    }
  }
  return o;
}

namespace {

std::mutex options_mu;  // guards options_set and options
bool options_set = false;
IoOptions options;

}  // namespace

Status RandomAccessReader::PRead(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    STOKER_ASSIGN_OR_RETURN(size_t got, ReadAt(offset + done, out.subspan(done)));
    if (got == 0) {
      return DataLoss(Name() + ": short read at offset " + std::to_string(offset) + ": wanted " +
                      std::to_string(out.size()) + " bytes, the object has " + std::to_string(done));
    }
    done += got;
  }
  return Status::Ok();
}

Status RandomAccessReader::PReadDetoured(uint64_t offset, std::span<uint8_t> out,
                                         std::span<const Detour> detours) const {
  STOKER_RETURN_IF_ERROR(PRead(offset, out));
  for (const Detour& d : detours) std::memcpy(d.dest.data(), out.data() + d.at, d.dest.size());
  return Status::Ok();
}

IoOptions DefaultIoOptions() {
  {
    std::lock_guard lock(options_mu);
    if (options_set) return options;
  }
  return StorageOptionsFromEnvironment();
}

void SetDefaultIoOptions(const IoOptions& o) {
  std::lock_guard lock(options_mu);
  options = o;
  options_set = true;
}

void ResetDefaultIoOptions() {
  std::lock_guard lock(options_mu);
  options_set = false;
}

void IoCounters::RecordLatency(uint64_t ns) {
  latency_ns.fetch_add(ns, std::memory_order_relaxed);
  const uint64_t ms = ns / 1000000;
  int b = ms == 0 ? 0 : std::bit_width(ms);
  latency_ms_log2[std::min(b, kBuckets - 1)].fetch_add(1, std::memory_order_relaxed);
}

double IoCounters::OutageSeconds() const {
  const int64_t since = faulting_since_ns.load(std::memory_order_relaxed);
  if (since == 0 || retrying.load(std::memory_order_relaxed) <= 0) return 0;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  return static_cast<double>(std::max<int64_t>(0, now - since)) / 1e9;
}

double IoCounters::OutageSecondsTotal() const {
  return static_cast<double>(outage_ns_ended.load(std::memory_order_relaxed)) / 1e9 + OutageSeconds();
}

std::string IoCounters::LastFault() const {
  std::lock_guard lock(last_fault_mu_);
  return last_fault_;
}

void IoCounters::SetLastFault(std::string what) {
  std::lock_guard lock(last_fault_mu_);
  last_fault_ = std::move(what);
}

IoCounters& GlobalIoCounters() {
  static IoCounters counters;
  return counters;
}

bool IsRemoteUrl(const std::string& url) {
  return url.starts_with("http://") || url.starts_with("https://") || url.starts_with("s3://") ||
         url.starts_with("hf://");
}

std::string ResolveFrom(const std::string& base, const std::string& path) {
  if (path.starts_with("/") || IsRemoteUrl(path) || !CheckScheme(path).ok()) return path;
  const std::string dir = SplitQuery(base).path;  // a query's '/' is not a directory's
  const size_t slash = dir.rfind('/');
  return (slash == std::string::npos ? std::string() : dir.substr(0, slash + 1)) + path;
}

namespace {

// The request target of a remote object: S3 signed, hf:// resolved on the
// Hub, http(s) with the loader's headers.
Result<HttpTarget> RemoteTarget(const std::string& url, const IoOptions& o) {
  if (url.starts_with("s3://")) return S3Target(url, o);
  if (url.starts_with("hf://")) return HfTarget(url, o);
  return HttpTargetFor(url, o);
}

}  // namespace

Result<std::unique_ptr<RandomAccessReader>> OpenReader(const std::string& url, const IoOptions& o) {
  std::unique_ptr<RandomAccessReader> r;
  if (IsRemoteUrl(url) && !o.cache_dir.empty()) {
    STOKER_ASSIGN_OR_RETURN(r, OpenCached(url, o));
  } else {
    STOKER_ASSIGN_OR_RETURN(r, OpenRemoteUncached(url, o));
  }
  // By content for a local file (one pread); a remote object only when its
  // name says so, since the check would cost a round trip per open.
  const bool maybe = !r->remote() || PathEndsWith(url, ".gz") || PathEndsWith(url, ".tgz") || PathEndsWith(url, ".zst");
  uint8_t magic[4] = {};
  if (maybe && r->Size() >= 4) {
    STOKER_RETURN_IF_ERROR(r->PRead(0, magic));
    if (IsGzipMagic(magic, 4)) return OpenGzipReader(std::move(r));
    if (IsZstdMagic(magic, 4)) return OpenZstdReader(std::move(r));
  }
  return r;
}

Result<std::unique_ptr<RandomAccessReader>> OpenRemoteUncached(const std::string& url, const IoOptions& o) {
  if (IsRemoteUrl(url)) {
    STOKER_ASSIGN_OR_RETURN(HttpTarget t, RemoteTarget(url, o));
    STOKER_ASSIGN_OR_RETURN(auto r, HttpReader::Open(std::move(t), o));
    return std::unique_ptr<RandomAccessReader>(std::move(r));
  }
  STOKER_RETURN_IF_ERROR(CheckScheme(url));
  STOKER_ASSIGN_OR_RETURN(auto r, PosixReader::Open(url));
  return std::unique_ptr<RandomAccessReader>(std::move(r));
}

Result<std::string> ReadWholeObject(const std::string& url, const IoOptions& o) {
  if (IsRemoteUrl(url) && !o.cache_dir.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> r, OpenCached(url, o));
    std::string text(r->Size(), '\0');
    STOKER_RETURN_IF_ERROR(r->PRead(0, {reinterpret_cast<uint8_t*>(text.data()), text.size()}));
    return text;
  }
  if (IsRemoteUrl(url)) {
    STOKER_ASSIGN_OR_RETURN(HttpTarget t, RemoteTarget(url, o));
    return HttpGetWhole(t, o);
  }
  STOKER_RETURN_IF_ERROR(CheckScheme(url));
  return ReadWholeFile(url);
}

}  // namespace stoker
