// pipeline/shard_files.cc — the bounded LRU of open shards; see shard_files.h.
#include "pipeline/shard_files.h"

#include <sys/resource.h>

#include <algorithm>

namespace stoker {

ShardFiles::ShardFiles(const std::vector<std::string>* paths, size_t max_open, uint64_t map_bytes, IoOptions io,
                       std::vector<bool> pread_only)
    : paths_(paths),
      max_open_(max_open > 0 ? max_open : DefaultMaxOpenFiles()),
      map_bytes_(map_bytes),
      io_(std::move(io)),
      pread_only_(std::move(pread_only)),
      entries_(paths->size()) {}

size_t ShardFiles::DefaultMaxOpenFiles() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 1024;
  return std::clamp<size_t>(static_cast<size_t>(lim.rlim_cur) / 4, 4, 1024);
}

Result<std::shared_ptr<const RandomAccessReader>> ShardFiles::Get(uint32_t shard) {
  std::unique_lock lock(mu_);
  Entry& e = entries_[shard];
  while (e.opening) opened_.wait(lock);  // one opener per shard; it is bounded by its retry budget
  if (e.file) {
    lru_.splice(lru_.begin(), lru_, e.lru_pos);
    return e.file;
  }
  while (!lru_.empty() && lru_.size() >= max_open_) EvictOne();
  // Open without the lock: a remote open is a HEAD round trip (and its
  // retries), which must not stall reads of shards already open.
  e.opening = true;
  lock.unlock();
  Result<std::unique_ptr<RandomAccessReader>> f = OpenReader((*paths_)[shard], io_);
  if (!f.ok() && f.status().code() == StatusCode::kIoError) {
    lock.lock();
    const bool idle = !lru_.empty();
    if (idle) EvictIdle();  // descriptors held elsewhere in the process: make room, retry once
    lock.unlock();
    if (idle) f = OpenReader((*paths_)[shard], io_);
  }
  lock.lock();
  e.opening = false;
  opened_.notify_all();
  if (!f.ok()) return f.status();
  while (!lru_.empty() && lru_.size() >= max_open_) EvictOne();  // others opened meanwhile
  ++opens_;
  std::unique_ptr<RandomAccessReader> reader = std::move(f).value();
  const uint64_t size = reader->Size();
  const bool pread_only = shard < pread_only_.size() && pread_only_[shard];
  if (map_bytes_ > 0 && !pread_only && size <= map_bytes_ - mapped_) {  // mmap is a syscall: cheap under the lock
    bool mapped = false;
    reader = MapIfLocal(std::move(reader), map_bytes_ == kMapUnbounded, &mapped);
    e.mapped = mapped ? size : 0;
    mapped_ += e.mapped;
  }
  e.file = std::shared_ptr<const RandomAccessReader>(std::move(reader));
  lru_.push_front(shard);
  e.lru_pos = lru_.begin();
  return e.file;
}

void ShardFiles::EvictOne() {
  const uint32_t victim = lru_.back();
  lru_.pop_back();
  Forget(entries_[victim]);  // closes now, or when the last in-flight read releases it
}

void ShardFiles::EvictIdle() {
  for (auto it = lru_.begin(); it != lru_.end();) {
    Entry& e = entries_[*it];
    if (e.file.use_count() == 1) {
      Forget(e);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShardFiles::Forget(Entry& e) {
  e.file.reset();
  mapped_ -= e.mapped;
  e.mapped = 0;
}

uint64_t ShardFiles::mapped_bytes() const {
  std::lock_guard lock(mu_);
  return mapped_;
}

size_t ShardFiles::open_count() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

uint64_t ShardFiles::opens() const {
  std::lock_guard lock(mu_);
  return opens_;
}

}  // namespace stoker
