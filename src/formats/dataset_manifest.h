// formats/dataset_manifest.h — a dataset's shards in one small file: each
// shard's path, size and sample count, so a loader plans an epoch without
// opening a shard (issue 31). `stoker index` and `stoker pack` write it
// beside the shards as kManifestName; a loader given it as its source reads
// it with one request, then each shard's sample offsets only when its reads
// reach that shard (pipeline/shard_index_cache.h).
// Thread-safety: values and free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/sample_index.h"
#include "io/reader.h"
#include "stoker/key_rule.h"
#include "stoker/status.h"

namespace stoker {

inline constexpr char kManifestName[] = "stoker-manifest.json";

// What a loader needs of a shard before its sample offsets: O(1) per shard.
struct ShardSummary {
  std::string path;               // as the loader opens it: a local path or a URL
  uint64_t bytes = 0;             // the shard's size
  uint32_t samples = 0;
  uint64_t sample_bytes = 0;      // the sum of its samples' stored sizes (end - begin)
  uint64_t max_sample_bytes = 0;  // the largest of them
};

// The summary of a loaded index.
ShardSummary SummaryOf(const ShardIndex& index);

struct DatasetManifest {
  KeyRule key_rule = KeyRule::kWebDataset;
  std::vector<ShardSummary> shards;
};

// The sum of its shards' samples.
uint64_t TotalSamples(const DatasetManifest& manifest);

// True when a source names a manifest (its path, before any URL query, ends in ".json").
bool IsManifestPath(const std::string& source);

// Reads a manifest from a local path or a URL (one GET, through the reader
// layer's ReadWholeObject as a sidecar is). Shard paths written relative
// to the manifest resolve against its directory (a URL's, with the
// manifest's query dropped); absolute paths and URLs stay as written.
// Malformed is DataLoss naming the manifest and the entry ("shards[3]
// 'a.tar': \"samples\" is missing"): a missing or mistyped field, a
// negative count or a shard's samples past 2^32 - 1, sizes that cannot hold
// together (sample_bytes over bytes, max_sample_bytes over sample_bytes or
// below sample_bytes / samples), a shard listed twice (after resolving), no
// shard at all, or a total "samples" other than the shards' sum. Another
// "format" is DataLoss too; another "version" is FailedPrecondition.
// Memory: O(shards), the text parsed once.
Result<DatasetManifest> ReadManifest(const std::string& path_or_url, const IoOptions& io = DefaultIoOptions());

// Writes it to a local path (atomically: a temporary file renamed), shard
// paths under the manifest's directory written relative to it, other local
// paths absolute, URLs as given (query included: pass none that holds a
// credential). One shard a line.
Status WriteManifest(const DatasetManifest& manifest, const std::string& path);

}  // namespace stoker
