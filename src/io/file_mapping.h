// io/file_mapping.h — read-only mappings of whole local files, shared through
// one bounded process-wide cache.
//
// A mapping's page-table entries are what make a copy out of it cheap: once a
// page is mapped, reading it is a user-space memcpy, no syscall, no page-cache
// lookup. Those entries live as long as the mapping, so the mapping outlives
// the reader (and the loader) that made it: a new loader over the same files
// (the next epoch's, a resumed one) finds it populated, as FFCV keeps its
// .beton mapped. The cache key is (device, inode, size, mtime): a file
// replaced, grown or truncated between opens gets a fresh mapping; one
// truncated while mapped is the fault guard's business (io/fault_guard.h).
//
// Bounds (read once per process from the environment):
//   STOKER_MMAP_CACHE_BYTES (4 GiB)  mapped bytes the cache keeps alive when no
//       reader holds them (least recently used dropped first); 0: none kept.
//   STOKER_MMAP_CACHE_FILES (1024)    mappings it keeps (vm.max_map_count is 65530).
// A mapping a reader still holds is never unmapped under it.
// Memory: mapped pages are page cache, not the loader's buffers. They count in
// the process's RSS (RssFile) and PSS while mapped, but the kernel reclaims them
// like any cached page under pressure (and a later read faults them back in);
// they are not part of the loader's memory budget.
// Thread-safety: Map from any thread; a FileMapping is immutable.
#pragma once

#include <cstdint>
#include <memory>

#include "core/file.h"
#include "stoker/status.h"

namespace stoker {

class FileMapping {
 public:
  // The whole of `file` as fstat sees it now, mapped read-only, shared: from
  // the cache when it holds this version of the file. `keep`: leave the new
  // mapping in the cache for later readers (else it is unmapped with its
  // last reader). A file of size 0 is not mapped (data() is null).
  static Result<std::shared_ptr<const FileMapping>> Map(const File& file, bool keep = true);

  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Mappings the cache holds now and the maps it made (for tests).
  static size_t CachedCount();
  static uint64_t MapsMade();
  // Drops every mapping the cache holds (readers keep theirs). For tests.
  static void ClearCache();

 private:
  FileMapping(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace stoker
