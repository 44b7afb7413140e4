// pipeline/shard_indexes.h — every shard's sample index, loaded at start.
//
// A remote shard's index costs round trips (a HEAD, the first bytes for the
// compression check, the .idx sidecar: 60 ms at 20 ms each), so loading them
// one after another makes a loader over a thousand remote shards wait a
// minute before its first batch. Remote shards are loaded by several threads
// at once. Local ones too, one thread per core: a shard without a sidecar is
// scanned (a page read per member, ~0.3 ms for 64 JPEG samples), and its
// index load is the serial work between a loader's construction and its
// first read (12 such shards: ~4 ms alone, ~2 ms on 2 cores); a single shard
// is loaded on the calling thread.
// The result is in shard order whatever the timing; of several failures the
// first shard's is returned, so the error is deterministic. A loader that
// keeps only some of the tables (shard_index_cache.h) takes each one as it
// is loaded (ForEachShardIndex), so they are never all held at once.
// Thread-safety: a free function; the threads it starts are joined before it returns.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/dataset_manifest.h"
#include "formats/sample_index.h"
#include "stoker/loader.h"

namespace stoker {

// Index loads in flight at once for remote shards.
inline constexpr int kParallelIndexLoads = 16;

// Hands each shard's index to `take(i, index)` as it is loaded, one call at
// a time, in any order; stops claiming shards after a failure.
Status ForEachShardIndex(const std::vector<std::string>& shards, KeyRule rule, const IoOptions& io,
                         const std::function<void(size_t, ShardIndex&&)>& take);

Result<std::vector<ShardIndex>> LoadShardIndexes(const std::vector<std::string>& shards, KeyRule rule,
                                                 const IoOptions& io);

// Each index's summary, in order.
std::vector<ShardSummary> SummariesOf(const std::vector<ShardIndex>& indexes);

// A loader's shards as it starts: a summary of each, and the tables loaded
// on the way that it keeps.
struct ShardTables {
  std::vector<ShardSummary> summaries;
  std::vector<std::pair<uint32_t, ShardIndex>> held;
  uint64_t bytes = 0;         // every table's bytes: measured, or from a manifest estimated
  bool all_held = false;      // tables that cannot be loaded again by path (image folder, Parquet)
  bool parquet = false;          // some shards are Parquet files (all of them, but in a mixture)
  uint64_t row_group_bytes = 0;  // Parquet: the largest row group
  int parquet_block = 0;         // Parquet: ParquetShuffleBlock (a mixture: its Parquet sources' least)
  std::vector<int> source_parquet_blocks;  // a mixture: each source's ParquetShuffleBlock, 0 where not Parquet
  // Where the counts came from, for settings: "the manifest <path>", "20
  // sidecars", "the tar headers of 20 remote shards, read whole", ...
  std::string from;
  uint64_t remote_scanned = 0;  // remote shards read whole to count their samples
};

// Bytes a manifest's shards' tables are taken to need per sample before any
// is loaded (a 2-member sample with an 11-byte key takes 51, sample_index.h).
inline constexpr uint64_t kIndexBytesPerSample = 64;

// The shards of options.sources (written to *shards): a manifest is read
// alone and no shard is opened; an image folder is listed; otherwise every
// shard's index is loaded (ForEachShardIndex) and summarized, and the tables
// are kept while they fit in `keep_bytes` (all for Parquet).
Result<ShardTables> SummarizeShards(const LoaderOptions& options, const IoOptions& io, uint64_t keep_bytes,
                                    std::vector<std::string>* shards);

// A mixture's source's key rule, and the field aliases its tables carry
// (MixOptions::members; null: none).
Result<KeyRule> SourceKeyRule(const LoaderOptions& options, size_t source);
// The first shard of each of a mixture's sources (MixOptions::shards, filled
// by SummarizeMixture; empty: not a mixture), and the source of a shard (0 where none).
std::vector<uint32_t> SourceFirstShards(const MixOptions& mix);
uint32_t SourceOfShard(const std::vector<uint32_t>& first_shards, uint32_t shard);
std::shared_ptr<const FieldAliases> SourceAliases(const LoaderOptions& options, size_t source);
// An error where a source's aliases name a field the loader does not have
// (nor its key_column); both loaders' (indexed and stream) check.
Status CheckSourceAliases(const LoaderOptions& options, size_t source, const FieldAliases* aliases);

// A mixture's shards (options.mix names its sources): each source summarized
// as SummarizeShards does it alone (a manifest, an image folder, Parquet
// files or tar shards; with its key rule and its fields' member names), one
// after another, its errors prefixed with the source's name, its held
// tables carrying its aliases; options.mix.shards gets how many shards each
// gave. Sources of different kinds (Parquet beside tar) mix: each shard is
// read as its kind is (ShardIndex::parquet).
Result<ShardTables> SummarizeMixture(LoaderOptions& options, const IoOptions& io, uint64_t keep_bytes,
                                     std::vector<std::string>* shards);

}  // namespace stoker
