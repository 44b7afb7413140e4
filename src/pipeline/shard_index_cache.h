// pipeline/shard_index_cache.h — each shard's sample offsets, loaded when the
// reads reach the shard and dropped when others need the room (issue 31).
//
// A loader plans from the shards' summaries (formats/dataset_manifest.h:
// counts and sizes, O(1) per shard); the per-sample tables (SampleTable,
// ~50 bytes a sample) are what grows with the dataset. Held for every shard,
// they cost a rank 100 MB per 2M samples, whatever share of them it reads.
// Here a shard's table is loaded on first use (its sidecar, or a scan of its
// tar headers, as LoadOrBuildShardIndex does) and kept while the tables held
// fit in `max_bytes`; past it the least recently used ones are dropped (one
// still leased to a read or decode lives until released), to be loaded again
// if the order comes back to them. The orders that return rarely are those
// with locality: shard order, a shuffle buffer, or windows of shards
// (LoaderOptions::shuffle_window), which the loader picks when the tables
// would not fit. max_bytes 0 keeps every table loaded.
// A reloaded table must agree with the summary the epoch was planned from
// (sample count and shard size); a shard changed in the meantime is an error
// that names it, not a silently different sample.
// Thread-safety: every method from any thread; one load per shard at a time
// (others wanting it wait for it), loads of different shards in parallel (the
// readers load what they read: pipeline/epoch_run.cc).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "formats/dataset_manifest.h"
#include "stoker/loader.h"

namespace stoker {

// The tables a loader keeps when they do not all fit: index_cache_bytes, or
// 16 MiB (~330k samples of 2 members), or under a memory budget an eighth of
// it, at least 8 MiB. Past it the auto order is windows of as many shards as
// half of it holds (planner.h): 16 MiB makes windows of ~160k samples, near
// Mosaic Streaming's default shuffle block (262,144), while what a rank holds
// stays the same from 300k samples to 400M.
inline uint64_t IndexCacheBytes(const LoaderOptions& options) {
  if (options.index_cache_bytes > 0) return options.index_cache_bytes;
  if (options.memory_budget == 0) return uint64_t{16} << 20;
  return std::max<uint64_t>(uint64_t{8} << 20, options.memory_budget / 8);
}

class ShardIndexCache {
 public:
  // Loads table `shard` (its number in the loader's order, and its summary).
  using Load = std::function<Result<ShardIndex>(uint32_t shard, const ShardSummary& summary)>;

  ShardIndexCache(std::vector<ShardSummary> shards, Load load, uint64_t max_bytes);
  // Every one of `indexes` held for good, none to load (tests).
  static std::shared_ptr<ShardIndexCache> Holding(std::vector<ShardIndex> indexes);

  // One per shard, in the loader's shard order.
  const std::vector<ShardSummary>& summaries() const { return shards_; }
  // Drops tables until those held fit (0: none dropped from now on).
  void SetMaxBytes(uint64_t max_bytes);

  // A table loaded already (while summarizing the shards), kept as if loaded
  // here; dropped at once when it does not fit.
  void Put(uint32_t shard, ShardIndex index);

  Result<std::shared_ptr<const ShardIndex>> Get(uint32_t shard);
  // Whether the table is held now (never loads, never waits for a load).
  bool Held(uint32_t shard) const;

  uint64_t max_bytes() const;
  uint64_t held_bytes() const;  // of the tables held now
  uint64_t loads() const;       // tables loaded here so far (not Put)

 private:
  struct Entry {
    std::shared_ptr<const ShardIndex> index;  // null when not held
    std::list<uint32_t>::iterator lru_pos;    // valid when index is set
    uint64_t bytes = 0;
    bool loading = false;
  };
  Status Check(uint32_t shard, const ShardIndex& index) const;
  void Hold(uint32_t shard, std::shared_ptr<const ShardIndex> index);  // REQUIRES mu_
  void Trim();  // REQUIRES mu_

  const std::vector<ShardSummary> shards_;
  const Load load_;
  mutable std::mutex mu_;
  uint64_t max_bytes_;              // guarded by mu_
  std::condition_variable loaded_;  // a load finished (with mu_)
  std::vector<Entry> entries_;      // guarded by mu_
  std::list<uint32_t> lru_;         // guarded by mu_; front = most recently used
  uint64_t held_ = 0;               // guarded by mu_
  uint64_t loads_ = 0;              // guarded by mu_
};

}  // namespace stoker
