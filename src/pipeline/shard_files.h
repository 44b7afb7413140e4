// pipeline/shard_files.h — the loader's open shards: a bounded LRU cache of
// readers (io/reader.h: a local file's descriptor, or a remote object's pinned
// size and ETag).
//
// A shard is opened on first read and kept open for the reads that follow;
// at most `max_open` shards stay cached, the least recently used one is
// closed first, so a dataset of 50,000 shards runs under RLIMIT_NOFILE=1024
// (or 64). Get hands out a shared_ptr lease: a shard evicted while a pread on
// it is in flight keeps its descriptor until that lease is released, so the
// descriptors open at once are at most max_open plus the reads in flight
// (io_depth), plus the opens in flight: a shard is opened without the lock (a
// remote open is a HEAD round trip that must not stall reads of other
// shards), one opener per shard, the others waiting for it. If open() still fails (EMFILE from descriptors the process holds
// elsewhere), every idle cached shard is closed and the open retried once.
// A remote reader holds no descriptor (its connections belong to the reading
// threads), but it is counted against the same bound: re-opening one costs a
// HEAD round trip, which max_open bounds in the same way.
// A local uncompressed shard is read through its mapping (io/mapped_reader.h)
// while the shards mapped at once stay within `map_bytes` (mapped pages count
// in the process's RSS); past it, a shard is read with pread. With no bound
// (kMapUnbounded) the mapping outlives the reader in a process-wide cache, so
// a shard evicted here, or a new loader on the same files, finds its pages
// still mapped; with a bound (a memory budget) it is unmapped with its reader.
// Thread-safety: Get and open_count from any thread; the reader behind a lease
// serves concurrent reads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/mapped_reader.h"

namespace stoker {

class ShardFiles {
 public:
  static constexpr uint64_t kMapUnbounded = ~uint64_t{0};
  // max_open 0: DefaultMaxOpenFiles(). map_bytes: the shard bytes mapped at
  // once (0: none); kMapUnbounded: as many as max_open, kept across readers.
  // io: how remote shards are reached (the loader's storage options).
  // pread_only[i] (empty: none): shard i is never mapped, whatever map_bytes.
  explicit ShardFiles(const std::vector<std::string>* paths, size_t max_open = 0,
                      uint64_t map_bytes = kMapUnbounded, IoOptions io = DefaultIoOptions(),
                      std::vector<bool> pread_only = {});

  Result<std::shared_ptr<const RandomAccessReader>> Get(uint32_t shard);

  size_t max_open() const { return max_open_; }
  size_t open_count() const;  // cached now (leases of evicted shards not counted)
  uint64_t opens() const;     // open() calls so far
  uint64_t mapped_bytes() const;  // of the shards cached now that are mapped

  // A quarter of the soft RLIMIT_NOFILE, in [4, 1024]: the rest stays for the
  // process (Python, torch, sockets) and the reads in flight.
  static size_t DefaultMaxOpenFiles();

 private:
  struct Entry {
    std::shared_ptr<const RandomAccessReader> file;  // null when not cached
    std::list<uint32_t>::iterator lru_pos;  // valid when file is set
    bool opening = false;  // a thread opens it now, without mu_; others wait on opened_
    uint64_t mapped = 0;   // its size when it is read through a mapping
  };
  void Forget(Entry& e);  // REQUIRES mu_; drops the cached reader
  void EvictOne();   // REQUIRES mu_
  void EvictIdle();  // REQUIRES mu_

  const std::vector<std::string>* paths_;
  const size_t max_open_;
  const uint64_t map_bytes_;
  const IoOptions io_;
  const std::vector<bool> pread_only_;
  mutable std::mutex mu_;
  std::condition_variable opened_;  // an open finished (with mu_)
  std::vector<Entry> entries_;  // guarded by mu_; one per shard
  std::list<uint32_t> lru_;     // guarded by mu_; front = most recently used
  uint64_t opens_ = 0;          // guarded by mu_
  uint64_t mapped_ = 0;         // guarded by mu_; sum of entries' mapped
};

}  // namespace stoker
