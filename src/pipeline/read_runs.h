// pipeline/read_runs.h — which samples one read fetches.
//
// Over HTTP or S3 every read costs a round trip (20 ms and more), so a read
// per sample leaves the pipeline waiting on latency however many readers run.
// A batch's consecutive samples that lie one after another in one shard (an
// unshuffled or buffer-shuffled stream, a shard streamed in order) are read as
// one run: one ranged GET of their whole byte range, then each sample decoded
// from its part of that buffer. Local files gain nothing from it (a pread
// costs no round trip, and one per sample starts decode sooner), so the auto
// setting coalesces remote shards only.
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "formats/sample_index.h"
#include "pipeline/planner.h"
#include "pipeline/shard_index_cache.h"
#include "stoker/loader.h"

namespace stoker {

// The auto limit for remote shards: a few megabytes keep a GET's transfer
// long next to its round trip, and a batch's read buffers bounded.
inline constexpr uint64_t kRemoteCoalesceBytes = 8ull << 20;
// Bytes between two samples (tar headers of members no field asks for) that a
// run reads and discards rather than end the run.
inline constexpr uint64_t kMaxCoalesceGap = 64 << 10;

// The most bytes one read covers for a shard at `shard_path`; 0: one sample per read.
uint64_t CoalesceLimit(const LoaderOptions& options, const std::string& shard_path);

// About how many reads one batch of the plan costs: 1 in stream order (no
// shuffle, or shuffle_buffer > 0: a batch is one run, two across a shard
// edge), ceil(batch / B) + 1 under the block shuffle (planner.h), and one
// per sample under a global permutation. Options with auto settings resolved.
int ReadsPerBatch(const LoaderOptions& options);

// Batches whose reads are queued before their buffer exists: with one GET
// per batch, reads in flight are otherwise capped by the prefetch depth (the
// batch buffers), not io_depth. options.read_ahead_batches, or auto for
// remote shards: enough batches to give every reader a read
// (io_depth / ReadsPerBatch, at least 1) but no more than kReadAheadBytes of
// their samples hold (`batch_bytes`: a batch's samples, as stored); 0 for
// local files.
inline constexpr uint64_t kReadAheadBytes = 256ull << 20;
int ReadAheadBatches(const LoaderOptions& options, const std::string& shard_path, uint64_t batch_bytes);

// io_depth -1 (auto): reads in flight apart from decode. Local preads cost no
// round trip, so kLocalIoDepth keeps the decoders fed. A remote read waits a
// round trip (20-100 ms and more), so enough reads are kept in flight for
// kRemoteBatchesInFlight batches per round trip (Little's law: at 100 ms, 8
// batches of 64 per round trip are 5,000 samples/s): 8 GETs in stream order,
// 40 for the block shuffle of 16 with batch 64, capped at kMaxRemoteIoDepth
// for one GET per sample. Each read holds one buffer (memory_budget.h); under
// a memory budget the depth is lowered to fit (AutoIoDepth, memory_budget.h).
inline constexpr int kLocalIoDepth = 4;
inline constexpr int kRemoteBatchesInFlight = 8;
// A token window from a remote .bin: one task each (epoch_run.cc), one or
// more round trips; this many wait at once.
inline constexpr int kRemoteTokenIoDepth = 16;
inline constexpr int kMaxRemoteIoDepth = 64;
int RemoteIoDepth(const LoaderOptions& options);

// How many of the plan positions [first, first + n) one read covers, from
// `first` (at least 1): the longest prefix in one shard whose samples follow
// each other (gaps of at most kMaxCoalesceGap) within `limit` bytes. With
// `limit` > 0 it reads the shard's index (1 when that fails: the read meets
// the same failure and reports it).
int RunLength(const EpochPlan& plan, ShardIndexCache& indexes, int64_t first, int n, uint64_t limit);
// The same rule over any of one shard's samples in turn: ref_at(k) for k < n.
int RunLengthOf(const std::function<SampleRef(int)>& ref_at, ShardIndexCache& indexes, int n, uint64_t limit);

// A batch whose slots do not follow its reads: a mixture's batch holds each
// source's draws in random slots (mix_order.h, step 3), draws that are
// consecutive in the source's pass (a block of 16 samples) but scattered
// over the batch, so runs of consecutive plan positions are single samples:
// a GET per sample over HTTP. Sorted by shard and sample they lie one after
// another again. `refs` are the batch's samples by slot; each returned group
// is one read task's slots, one shard's samples in file order: cut into runs
// here when the shard's offsets are held (RunLength's rule), one group per
// shard when they are not (the reader cuts it once it has loaded them, as
// EpochRun::SampleRun leaves it), one slot each where `limit_of` the shard
// is 0 (not coalesced).
std::vector<std::vector<int>> ScatteredRuns(std::span<const SampleRef> refs, ShardIndexCache& indexes,
                                            const std::function<uint64_t(uint32_t shard)>& limit_of);

}  // namespace stoker
