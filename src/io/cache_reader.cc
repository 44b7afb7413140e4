// io/cache_reader.cc — see cache_reader.h.
#include "io/cache_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/file.h"
#include "io/http_reader.h"
#include "io/posix_reader.h"

namespace stoker {

namespace {

constexpr size_t kChunk = 8u << 20;

// An flock held for the scope; the descriptor closes (and unlocks) with it.
class FileLock {
 public:
  static Result<FileLock> Acquire(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return IoError(path + ": cannot open lock file: " + std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd);
        return IoError(path + ": flock: " + std::strerror(errno));
      }
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

std::string KeyFor(const std::string& url) {
  uint64_t h = CacheChecksum(reinterpret_cast<const uint8_t*>(url.data()), url.size(), 0x5eed);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct Meta {
  uint64_t size = 0;
  std::string etag;
  uint64_t checksum = 0;
  std::string url;
};

bool ReadMeta(const std::string& path, Meta* m) {
  std::ifstream in(path);
  std::string magic, size, sum;
  if (!std::getline(in, magic) || magic != "stoker-cache 1") return false;
  if (!std::getline(in, size) || !std::getline(in, m->etag) || !std::getline(in, sum) || !std::getline(in, m->url)) {
    return false;
  }
  m->size = std::strtoull(size.c_str(), nullptr, 10);
  m->checksum = std::strtoull(sum.c_str(), nullptr, 16);
  return true;
}

Result<uint64_t> FileChecksum(const File& f, uint64_t size) {
  std::vector<uint8_t> buf(std::min<uint64_t>(kChunk, std::max<uint64_t>(size, 1)));
  uint64_t h = 0;
  for (uint64_t off = 0; off < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    STOKER_RETURN_IF_ERROR(f.PRead(off, {buf.data(), n}));
    h = CacheChecksum(buf.data(), n, h);
    off += n;
  }
  return h;
}

// A valid entry: meta and data agree on size and checksum.
Result<std::unique_ptr<RandomAccessReader>> TryHit(const std::string& data, const std::string& meta_path,
                                                   const std::string& url, bool* corrupt) {
  *corrupt = false;
  Meta m;
  if (!ReadMeta(meta_path, &m)) return NotFound("no entry");
  Result<File> f = File::OpenRead(data);
  if (!f.ok()) return NotFound("no data");
  Result<uint64_t> size = f->Size();
  Result<uint64_t> sum = size.ok() && *size == m.size ? FileChecksum(*f, m.size) : Result<uint64_t>(uint64_t{0});
  if (m.url != url || !size.ok() || *size != m.size || !sum.ok() || *sum != m.checksum) {
    *corrupt = true;
    return DataLoss(data + ": cache entry of " + url + " is damaged");
  }
  ::utimensat(AT_FDCWD, data.c_str(), nullptr, 0);  // LRU: now is its last use
  // The descriptor just verified, not the path again: an eviction (another
  // thread's fetch over the budget) may unlink the entry at any moment.
  return std::unique_ptr<RandomAccessReader>(PosixReader::Adopt(std::move(f).value(), m.size));
}

Status Fetch(const std::string& url, const IoOptions& o, const std::string& data, const std::string& meta_path,
             uint64_t* fetched_size) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> remote, OpenRemoteUncached(url, o));
  const uint64_t size = remote->Size();
  *fetched_size = size;
  if (size > o.cache_bytes) return FailedPrecondition("larger than the cache budget");
  const std::string tmp = data + ".tmp." + std::to_string(::getpid());
  STOKER_ASSIGN_OR_RETURN(File out, File::OpenWrite(tmp));
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(kChunk, std::max<uint64_t>(size, 1))));
  uint64_t h = 0;
  for (uint64_t off = 0; off < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    Status st = remote->PRead(off, {buf.data(), n});
    if (st.ok()) st = out.Write({buf.data(), n});
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
    h = CacheChecksum(buf.data(), n, h);
    off += n;
  }
  if (::fsync(out.fd()) != 0) {
    ::unlink(tmp.c_str());
    return IoError(tmp + ": fsync: " + std::strerror(errno));
  }
  STOKER_RETURN_IF_ERROR(out.Close());
  std::string etag;  // recorded for inspection; a hit trusts the entry's checksum, not a new HEAD
  if (auto* http = dynamic_cast<const HttpReader*>(remote.get())) etag = http->etag();
  std::ostringstream meta;
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(h));
  meta << "stoker-cache 1\n" << size << "\n" << etag << "\n" << sum << "\n" << url << "\n";
  const std::string text = meta.str();
  const std::string meta_tmp = meta_path + ".tmp." + std::to_string(::getpid());
  STOKER_RETURN_IF_ERROR(WriteWholeFile(meta_tmp, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  if (::rename(tmp.c_str(), data.c_str()) != 0 || ::rename(meta_tmp.c_str(), meta_path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    ::unlink(meta_tmp.c_str());
    return IoError(data + ": rename into the cache: " + std::strerror(errno));
  }
  return Status::Ok();
}

// Deletes least recently used entries until the directory fits the budget.
void Evict(const std::string& dir, uint64_t budget, const std::string& keep) {
  Result<FileLock> lock = FileLock::Acquire(dir + "/.lock");
  if (!lock.ok()) return;
  struct E {
    std::string stem;
    uint64_t size;
    timespec mtime;
  };
  std::vector<E> entries;
  uint64_t total = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* de = ::readdir(d)) {
      std::string name = de->d_name;
      if (!name.ends_with(".data")) continue;
      struct stat st;
      if (::stat((dir + "/" + name).c_str(), &st) != 0) continue;
      entries.push_back({name.substr(0, name.size() - 5), static_cast<uint64_t>(st.st_size), st.st_mtim});
      total += static_cast<uint64_t>(st.st_size);
    }
    ::closedir(d);
  }
  std::sort(entries.begin(), entries.end(), [](const E& a, const E& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const E& e : entries) {
    if (total <= budget) break;
    if (e.stem == keep) continue;
    ::unlink((dir + "/" + e.stem + ".meta").c_str());  // meta first: a torn entry is never valid
    ::unlink((dir + "/" + e.stem + ".data").c_str());
    total -= e.size;
    GlobalIoCounters().cache_evictions.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

uint64_t CacheChecksum(const uint8_t* data, size_t n, uint64_t seed) {
  // FNV-1a style over 8-byte words with a final mix: fast, not cryptographic.
  uint64_t h = seed ^ 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

Result<std::unique_ptr<RandomAccessReader>> OpenCached(const std::string& url, const IoOptions& o) {
  const std::string& dir = o.cache_dir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return IoError(dir + ": cannot create the cache directory: " + std::strerror(errno));
  }
  IoCounters& c = GlobalIoCounters();
  const std::string stem = KeyFor(url);
  const std::string data = dir + "/" + stem + ".data", meta = dir + "/" + stem + ".meta";
  bool corrupt = false;
  auto hit = TryHit(data, meta, url, &corrupt);  // no lock: entries are renamed in whole
  if (hit.ok()) {
    c.cache_hits.fetch_add(1, std::memory_order_relaxed);
    return hit;
  }
  STOKER_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(dir + "/" + stem + ".lock"));
  hit = TryHit(data, meta, url, &corrupt);  // another process may have fetched it meanwhile
  if (hit.ok()) {
    c.cache_hits.fetch_add(1, std::memory_order_relaxed);
    return hit;
  }
  if (corrupt) {
    c.cache_corrupt.fetch_add(1, std::memory_order_relaxed);
    ::unlink(meta.c_str());
    ::unlink(data.c_str());
  }
  uint64_t size = 0;
  Status st = Fetch(url, o, data, meta, &size);
  if (st.code() == StatusCode::kFailedPrecondition) return OpenRemoteUncached(url, o);  // over budget: uncached
  STOKER_RETURN_IF_ERROR(st);
  c.cache_misses.fetch_add(1, std::memory_order_relaxed);  // counted once fetched
  Evict(dir, o.cache_bytes, stem);
  STOKER_ASSIGN_OR_RETURN(auto r, PosixReader::Open(data));
  return std::unique_ptr<RandomAccessReader>(std::move(r));
}

}  // namespace stoker
