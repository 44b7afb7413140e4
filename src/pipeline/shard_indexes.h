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
// first shard's is returned, so the error is deterministic.
// Thread-safety: a free function; the threads it starts are joined before it returns.
#pragma once

#include <string>
#include <vector>

#include "formats/sample_index.h"

namespace stoker {

// Index loads in flight at once for remote shards.
inline constexpr int kParallelIndexLoads = 16;

Result<std::vector<ShardIndex>> LoadShardIndexes(const std::vector<std::string>& shards, KeyRule rule,
                                                 const IoOptions& io);

}  // namespace stoker
