// io/file_mapping.cc — see file_mapping.h.
#include "io/file_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <tuple>

#include "io/fault_guard.h"

namespace stoker {

namespace {

using Key = std::tuple<uint64_t, uint64_t, uint64_t, int64_t, int64_t>;  // dev, inode, size, mtime s, ns

uint64_t EnvBytes(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// The process-wide cache: every member guarded by mu.
struct Cache {
  std::mutex mu;
  const uint64_t max_bytes = EnvBytes("STOKER_MMAP_CACHE_BYTES", 4ull << 30);
  const uint64_t max_files = EnvBytes("STOKER_MMAP_CACHE_FILES", 1024);
  struct Entry {
    std::shared_ptr<const FileMapping> mapping;
    std::list<Key>::iterator lru_pos;
  };
  std::map<Key, Entry> entries;
  std::list<Key> lru;  // front: most recently used
  uint64_t bytes = 0;
  uint64_t maps_made = 0;

  void Trim() {  // REQUIRES mu
    while (!lru.empty() && (bytes > max_bytes || entries.size() > max_files)) {
      auto it = entries.find(lru.back());
      bytes -= it->second.mapping->size();
      entries.erase(it);  // unmapped now, or when the last reader lets go
      lru.pop_back();
    }
  }
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: readers may outlive static destruction order
  return *cache;
}

}  // namespace

FileMapping::~FileMapping() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::shared_ptr<const FileMapping>> FileMapping::Map(const File& file, bool keep) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) return IoError(file.path() + ": fstat: " + std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return std::shared_ptr<const FileMapping>(new FileMapping(nullptr, 0));
  const Key key{st.st_dev, st.st_ino, size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  // At every map, cached or not: a handler installed since the last one
  // (Python's faulthandler.enable()) is chained behind ours again.
  InstallFaultGuard();
  Cache& c = TheCache();
  {
    std::lock_guard lock(c.mu);
    if (auto it = c.entries.find(key); it != c.entries.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second.lru_pos);
      return it->second.mapping;
    }
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.fd(), 0);
  if (p == MAP_FAILED) return IoError(file.path() + ": mmap of " + std::to_string(size) + " bytes: " + std::strerror(errno));
  // Reads of a shard are mostly forward, sample after sample, but a shuffled
  // epoch jumps: leave the kernel's default readahead and fault-around.
  std::shared_ptr<const FileMapping> m(new FileMapping(static_cast<const uint8_t*>(p), size));
  std::lock_guard lock(c.mu);
  ++c.maps_made;
  if (!keep || c.max_bytes == 0 || c.max_files == 0 || size > c.max_bytes) return m;
  if (auto it = c.entries.find(key); it != c.entries.end()) return it->second.mapping;  // mapped meanwhile
  c.lru.push_front(key);
  c.entries.emplace(key, Cache::Entry{m, c.lru.begin()});
  c.bytes += size;
  c.Trim();
  return m;
}

size_t FileMapping::CachedCount() {
  Cache& c = TheCache();
  std::lock_guard lock(c.mu);
  return c.entries.size();
}

uint64_t FileMapping::MapsMade() {
  Cache& c = TheCache();
  std::lock_guard lock(c.mu);
  return c.maps_made;
}

void FileMapping::ClearCache() {
  Cache& c = TheCache();
  std::lock_guard lock(c.mu);
  c.entries.clear();
  c.lru.clear();
  c.bytes = 0;
}

}  // namespace stoker
