// pipeline/shard_indexes.cc — see shard_indexes.h.
#include "pipeline/shard_indexes.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/cpu_share.h"
#include "formats/parquet_file.h"
#include "io/reader.h"

namespace stoker {

Result<std::vector<ShardIndex>> LoadShardIndexes(const std::vector<std::string>& shards, KeyRule rule,
                                                 const IoOptions& io) {
  const bool remote = std::any_of(shards.begin(), shards.end(), [](const std::string& s) { return IsRemoteUrl(s); });
  const size_t cores = static_cast<size_t>(CurrentCpuShare().cores);  // the job's CPUs, not the machine's
  const int threads = static_cast<int>(std::min<size_t>(shards.size(), remote ? kParallelIndexLoads : cores));
  std::vector<std::optional<Result<ShardIndex>>> results(shards.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // Each worker claims the next shard and loads every shard it claims; after
  // a failure no more are claimed. Claims go in shard order, so every shard
  // below a claimed one was claimed too: the lowest failing shard is loaded.
  auto work = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= shards.size()) break;
      results[i] = IsParquetPath(shards[i]) ? LoadParquetIndex(shards[i], io) : LoadOrBuildShardIndex(shards[i], rule, io);
      if (!results[i]->ok()) failed = true;
    }
  };
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
  }
  std::vector<ShardIndex> out;
  out.reserve(shards.size());
  for (std::optional<Result<ShardIndex>>& r : results) {
    if (!r) continue;  // unclaimed: above a failed shard, which returns first
    if (!r->ok()) return r->status();
    out.push_back(std::move(r->value()));
  }
#if defined(__GLIBC__)
  // A scan's scratch (the tar's members, its samples before they are packed
  // into the table: ~5 MB for 10,000 samples) is freed, but its pages stay
  // with the arena of the thread that scanned: ~10 MB of RSS over 20 shards
  // or more, held for the loader's life. Give them back.
  malloc_trim(0);
#endif
  return out;
}

}  // namespace stoker
