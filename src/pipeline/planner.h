// pipeline/planner.h — the order of one epoch for one rank.
//
// A pure function of (sample counts per shard, options, epoch): no thread
// timing, no I/O. Same inputs, same plan, on any machine and any thread count.
//
//  * no shuffle: shard order, then member order;
//  * shuffle, shuffle_buffer == 0: one global permutation of every sample;
//  * shuffle, shuffle_buffer > 0: shards permuted, then samples streamed
//    through a buffer of that many samples (WebDataset's scheme, simulated
//    here so it is deterministic), so reads stay mostly sequential.
// The epoch order is then cut into world_size equal contiguous parts (drop or
// pad policy, reported in PlanInfo), and this rank's part into batches.
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
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

Result<EpochPlan> PlanEpoch(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                            uint64_t epoch);

// Megatron's pretraining sampler over `total` samples from `consumed`: each
// global batch of batch_size * world_size consecutive samples gives rank r its
// [r * batch_size, (r + 1) * batch_size) part; a partial last global batch is
// dropped (drop_last, as megatron trains). O(1): no list is built.
Result<EpochPlan> PlanTokenRun(int64_t total, int64_t consumed, const LoaderOptions& options);

// A 64-bit mix of its arguments (splitmix64); seeds of shuffles and of
// per-sample augmentation derive from it.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace stoker
