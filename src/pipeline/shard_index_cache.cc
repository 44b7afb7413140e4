// pipeline/shard_index_cache.cc — see shard_index_cache.h.
#include "pipeline/shard_index_cache.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif


namespace stoker {

ShardIndexCache::ShardIndexCache(std::vector<ShardSummary> shards, Load load, uint64_t max_bytes)
    : shards_(std::move(shards)), load_(std::move(load)), max_bytes_(max_bytes), entries_(shards_.size()) {}

std::shared_ptr<ShardIndexCache> ShardIndexCache::Holding(std::vector<ShardIndex> indexes) {
  std::vector<ShardSummary> shards;
  for (const ShardIndex& index : indexes) shards.push_back(SummaryOf(index));
  auto cache = std::make_shared<ShardIndexCache>(
      std::move(shards),
      [](uint32_t, const ShardSummary& shard) -> Result<ShardIndex> {
        return FailedPrecondition(shard.path + " is not held");
      },
      0);
  for (uint32_t i = 0; i < indexes.size(); ++i) cache->Put(i, std::move(indexes[i]));
  return cache;
}

void ShardIndexCache::SetMaxBytes(uint64_t max_bytes) {
  std::lock_guard lock(mu_);
  max_bytes_ = max_bytes;
  Trim();
}

uint64_t ShardIndexCache::max_bytes() const {
  std::lock_guard lock(mu_);
  return max_bytes_;
}

Status ShardIndexCache::Check(uint32_t shard, const ShardIndex& index) const {
  const ShardSummary& s = shards_[shard];
  if (index.samples.size() == s.samples && (s.bytes == 0 || index.shard_size == s.bytes)) return Status::Ok();
  return DataLoss(s.path + " changed since the loader planned its samples: " + std::to_string(s.samples) +
                  " samples in " + std::to_string(s.bytes) + " bytes then, " + std::to_string(index.samples.size()) +
                  " in " + std::to_string(index.shard_size) + " now (a manifest out of date? run stoker index again)");
}

void ShardIndexCache::Hold(uint32_t shard, std::shared_ptr<const ShardIndex> index) {
  Entry& e = entries_[shard];
  e.bytes = index->samples.MemoryBytes() + index->shard_path.size();
  e.index = std::move(index);
  lru_.push_front(shard);
  e.lru_pos = lru_.begin();
  held_ += e.bytes;
}

void ShardIndexCache::Trim() {
  // The newest table stays whatever its size: it was wanted just now.
  while (max_bytes_ > 0 && held_ > max_bytes_ && lru_.size() > 1) {
    Entry& e = entries_[lru_.back()];
    lru_.pop_back();
    held_ -= e.bytes;
    e.index.reset();
    e.bytes = 0;
  }
}

void ShardIndexCache::Put(uint32_t shard, ShardIndex index) {
  auto held = std::make_shared<const ShardIndex>(std::move(index));
  std::lock_guard lock(mu_);
  Entry& e = entries_[shard];
  if (e.index || e.loading) return;
  Hold(shard, std::move(held));
  // Tables put in shard order keep the first ones: the newest is dropped
  // rather than an older one, which a plan in shard order reads first.
  if (max_bytes_ > 0 && held_ > max_bytes_) {
    lru_.erase(e.lru_pos);
    held_ -= e.bytes;
    e.index.reset();
    e.bytes = 0;
  }
}

Result<std::shared_ptr<const ShardIndex>> ShardIndexCache::Get(uint32_t shard) {
  std::unique_lock lock(mu_);
  Entry& e = entries_[shard];
  for (;;) {
    if (e.index) {
      lru_.splice(lru_.begin(), lru_, e.lru_pos);
      return e.index;
    }
    if (!e.loading) break;
    loaded_.wait(lock);
  }
  e.loading = true;
  lock.unlock();
  Result<ShardIndex> index = load_(static_cast<uint32_t>(shard), shards_[shard]);
#if defined(__GLIBC__)
  // A scan's scratch (its members and samples before they are packed: ~5 MB
  // for 10,000 samples) is freed, but its pages stay with the loading
  // thread's arena; with tables loaded again and again by several readers
  // that held ~30 MB for the loader's life (bench/scale_memory.py, 2M
  // samples). Give them back, once per table loaded.
  malloc_trim(0);
#endif
  Status st = index.ok() ? Check(shard, *index) : index.status();
  std::shared_ptr<const ShardIndex> held;
  if (st.ok()) held = std::make_shared<const ShardIndex>(std::move(index.value()));
  lock.lock();
  e.loading = false;
  if (held) {
    ++loads_;
    Hold(shard, held);
    Trim();
  }
  loaded_.notify_all();
  if (!st.ok()) return st;
  return held;
}

bool ShardIndexCache::Held(uint32_t shard) const {
  std::lock_guard lock(mu_);
  return entries_[shard].index != nullptr;
}

uint64_t ShardIndexCache::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_;
}

uint64_t ShardIndexCache::loads() const {
  std::lock_guard lock(mu_);
  return loads_;
}

}  // namespace stoker
