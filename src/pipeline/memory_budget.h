// pipeline/memory_budget.h — what a loader configuration needs in memory, and
// the check of LoaderOptions::memory_budget against it at construction.
//
// The need is the sum of what the engine keeps at its bounds:
//  * batch buffers: (prefetch_batches + 1) pooled buffers of the layout's size;
//  * read buffers: one per reader (io_depth), per decode-queue slot
//    (max(2, io_depth)), per decoder and one for refills, each as large as the
//    largest sample in the shard summaries;
//  * decode scratch, per decoder: for JPEG fields a decoded plane estimated at
//    12 bytes per compressed byte of the largest sample (about 4:1 compression of
//    RGB, with DCT-scaled and resize planes beside it), for NPZ the largest
//    sample again (a deflated member's output);
//  * a fixed 16 MiB for what scales with neither: thread stacks in use,
//    allocator slack, the consumer's Python objects.
// The estimate errs high; the budget is the bound the user states, and the
// loader refuses, naming the number it would need, a configuration above it.
// Thread-safety: free functions on values.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dataset_manifest.h"
#include "pipeline/batch_layout.h"
#include "stoker/loader.h"

namespace stoker {

struct MemoryNeed {
  uint64_t batch_buffers = 0;
  uint64_t read_buffers = 0;
  uint64_t decode_scratch = 0;
  uint64_t overhead = 0;
  uint64_t row_groups = 0;  // Parquet: decoded row groups kept and being decoded (formats/parquet_file.h)
  uint64_t total() const { return batch_buffers + read_buffers + decode_scratch + overhead + row_groups; }
  std::string ToString() const;
};

// `shards`: the dataset's summaries; `row_group_bytes`: for Parquet files,
// the largest row group (ParquetMaxRowGroupBytes), else 0.
MemoryNeed EstimateMemory(const LoaderOptions& options, const BatchLayout& layout,
                          const std::vector<ShardSummary>& shards, uint64_t row_group_bytes = 0);

// A stream's need (stream_run.h), with no index to give the largest sample:
// the batch buffers as above; read buffers for the shuffle buffer's samples,
// the decode queue's and one per decoder, each `sample_bytes` (the stream's
// first sample: an estimate, which the message says), and three read
// windows of `window_bytes` (the window, its read ahead, the next shard's
// first); a mixture's sources a shuffle buffer and three windows each;
// decode scratch and overhead as above.
MemoryNeed EstimateStreamMemory(const LoaderOptions& options, const BatchLayout& layout, uint64_t sample_bytes,
                                uint64_t window_bytes);

// The stream's queue of samples placed in their slots, waiting for a
// decoder: enough to keep every decoder (at most `decoders`) busy while the
// producer reads.
inline size_t StreamDecodeQueueCapacity(int batch_size, int decoders) {
  return static_cast<size_t>(std::max(batch_size, 2 * decoders));
}

// Samples read and waiting for a decoder (the queue between the stages).
// Tar reads are each a sample's bytes, so a few queued keep the decoders
// fed. A Parquet reader that reaches a new row group decodes all of it
// first (256 V JPEGs: 14 MB), and with 2 rows queued the decoders ran dry
// meanwhile: 88-93% busy over an in-order V epoch against 98% for tar. A
// batch of rows queued keeps them at 96-98%.
inline size_t DecodeQueueCapacity(const LoaderOptions& options, bool parquet) {
  const int n = std::max(2, options.io_depth);
  return static_cast<size_t>(parquet ? std::max(n, options.batch_size) : n);
}

// Decoded Parquet row groups kept with `io_depth` reads in flight: one per
// read and two more, so the groups of the blocks being read stay decoded
// while their rows are (formats/parquet_file.h's ParquetRows bound); with
// the mix (LoaderOptions::shuffle_mix M > 0) M + 1 more, as a batch reads
// rows from every row group of its run (M blocks on row group edges, one of
// them a file's last block, which holds its short last group too). Reads
// move through the order a batch or so ahead, so at a run's edge the groups
// of the run before are the least recently used and go first.
inline size_t ParquetGroupsKept(int io_depth, int mix = 0) {
  return static_cast<size_t>(std::max(1, io_depth)) + 2 + (mix > 0 ? static_cast<size_t>(mix) + 1 : 0);
}

// options.io_depth, or for -1 (auto) kLocalIoDepth, or for `remote` shards
// RemoteIoDepth (read_runs.h) halved (not below kLocalIoDepth) while the need
// exceeds options.memory_budget: fewer reads in flight rather than a refusal.
// `options` has shuffle_block resolved.
int AutoIoDepth(const LoaderOptions& options, const BatchLayout& layout, const std::vector<ShardSummary>& shards,
                bool remote, uint64_t row_group_bytes = 0);

// Ok when options.memory_budget is 0 (no budget) or the need fits in it.
// `basis`, when not empty, says what an estimate rests on (a stream's first sample).
Status CheckMemoryBudget(const LoaderOptions& options, const MemoryNeed& need, const std::string& basis = "");

}  // namespace stoker
