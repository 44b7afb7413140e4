// pipeline/planner.h — the order of one epoch for one rank.
//
// A pure function of (sample counts per shard, options, epoch): no thread
// timing, no I/O. Same inputs, same plan, on any machine and any thread count.
//
//  * no shuffle: shard order, then member order;
//  * shuffle, shuffle_buffer == 0, shuffle_block 1: one global permutation of
//    every sample (random access by index);
//  * shuffle, shuffle_buffer == 0, shuffle_block B > 1 (the block shuffle, the
//    auto choice for remote shards): each shard is cut into blocks of B
//    consecutive samples at a phase drawn per shard and epoch (a first or
//    last piece shorter than B joins its neighbour, so blocks hold B..2B-1
//    samples), and all blocks of all shards are permuted together. A block
//    stays contiguous in plan order, so the batch that holds it reads it as
//    one ranged GET (read_runs.h): a batch of b samples is at most
//    ceil(b / B) + 1 reads instead of b. The moving phase keeps blocks from
//    being the same groups every epoch; samples closer than B in a shard
//    still often share a batch (README, "Shuffle quality", has the measures).
//    Mosaic Streaming's shuffles trade the same way for whole-shard
//    downloads: py1b shuffles the shards, cuts the concatenation into
//    fixed blocks of shuffle_block_size samples and permutes samples within
//    each block; py1br draws the block sizes at random so block edges move
//    between epochs; py1e spreads each shard's samples over a window by a
//    random offset and sorts, a softer edge. Their blocks are ~2^18 samples,
//    as each must be a few whole shards held on local disk. Here a block is
//    a byte range read once, so it is tiny (tens of samples), and the moving
//    edge is py1br's idea done as a random phase per shard;
//  * shuffle, shuffle_buffer > 0: shards permuted, then samples streamed
//    through a buffer of that many samples (WebDataset's scheme, simulated
//    here so it is deterministic), so reads stay mostly sequential.
// None of them depends on rank, world size or batch size before the cut
// below, so elastic resume (elastic.h) re-cuts the same global order.
// The epoch order is then cut into world_size contiguous parts (ShareOfRank:
// equal under the drop or pad policy, reported in PlanInfo; within one sample
// of each other under the exact policy), and this rank's part into batches,
// as many on every rank.
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/loader.h"

namespace stoker {

struct SampleRef {
  uint32_t shard;
  uint32_t sample;   // index within the shard
  uint64_t global;   // index within the dataset (shards concatenated)
};

struct EpochPlan {
  PlanInfo info;
  std::vector<SampleRef> samples;  // this rank's samples in delivery order (shards)
  // Token runs keep no list: sample i of this rank is global sample
  // first + (i / micro) * global_batch + rank_offset + i % micro.
  bool strided = false;
  uint64_t first = 0, global_batch = 0, rank_offset = 0, micro = 1;

  SampleRef At(int64_t i) const {
    if (!strided) return samples[static_cast<size_t>(i)];
    const uint64_t u = static_cast<uint64_t>(i);
    return SampleRef{0, 0, first + (u / micro) * global_batch + rank_offset + u % micro};
  }
};

// One rank's part of an order of `total` samples: positions [begin, begin +
// count) of it, taken modulo total (the pad policy's repeats), delivered in
// `batches` batches of options.batch_size, the same number on every rank.
//  * drop: floor(total / world) each; drop_last cuts each part to whole batches.
//  * pad: ceil(total / world) each; the last rank's part wraps to the start.
//  * exact: floor(total / world), plus one for the first total % world ranks,
//    so every position is in exactly one part; batches is what the largest
//    part needs, so a smaller part ends in a short or empty (0-row) batch.
//    drop_last would drop samples, so it must be false.
// PlanEpoch cuts the epoch with it and elastic resume (elastic.h) the rest of
// one; `left` words messages ("in the dataset", "left in this epoch").
struct RankShare {
  uint64_t begin = 0;
  uint64_t count = 0;
  int64_t batches = 0;
};
Result<RankShare> ShareOfRank(uint64_t total, const LoaderOptions& options, int world, int rank,
                              const std::string& left);

Result<EpochPlan> PlanEpoch(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                            uint64_t epoch);

// Megatron's pretraining sampler over `total` samples from `consumed`: each
// global batch of batch_size * world_size consecutive samples gives rank r its
// [r * batch_size, (r + 1) * batch_size) part; a partial last global batch is
// dropped (drop_last, as megatron trains), or under the exact partition
// delivered as the sampler with drop_last=False does: rank r's part of it is
// its slice, short or empty. O(1): no list is built.
Result<EpochPlan> PlanTokenRun(int64_t total, int64_t consumed, const LoaderOptions& options);

// The block for shuffle_block -1 (auto) over local files is 1: a pread costs
// no round trip, so single samples cost nothing. Over remote shards, blocks
// of this many samples: a V batch of 64 is then about 5 coalesced GETs.
inline constexpr int kRemoteShuffleBlock = 16;
// options.shuffle_block, or the auto choice for shards that are `remote`.
int AutoShuffleBlock(const LoaderOptions& options, bool remote);

// A 64-bit mix of its arguments (splitmix64); seeds of shuffles and of
// per-sample augmentation derive from it.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace stoker
