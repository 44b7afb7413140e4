// pipeline/elastic.h — elastic resume: the rest of an epoch, after a state
// saved by W ranks, re-partitioned among W' ranks (a pure function).
//
// "Consumed" (README, Elastic resume): in a synchronous job every rank saves
// at the same step, so a state (world_size W, next_batch n) means each old
// rank r delivered the first n batches of its part of the epoch. The samples
// an uninterrupted run would still deliver are the union, in old rank order,
// of each old rank's part after its first n * batch_size samples. That list
// is cut among the W' new ranks exactly as PlanEpoch cuts the whole epoch
// (equal contiguous parts, the same drop/pad policy and drop_last), so every
// new rank runs the same number of batches; with the drop policy up to W'-1
// remaining samples (plus partial batches under drop_last) are dropped and
// reported in PlanInfo, as for a fresh epoch. A resume of a resumed epoch
// chains: each stage (W_k, n_k) is applied to the list the stage before left.
// That list is never built: it is spans of the epoch's computed order
// (planner.h, EpochOrder), at most two per old rank of each stage, so a
// resume costs O(shards + ranks) as a fresh plan does.
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/planner.h"

namespace stoker {

struct ElasticStage {
  int world_size;      // ranks that ran this stage
  int64_t next_batch;  // batches each of them had delivered when the state was saved
};

// What is left of an epoch's order of `size` positions after the stages,
// oldest first, as spans of its positions (every rank's unconsumed part, in
// rank order). options: batch_size, drop_last, partition.
Result<std::vector<OrderSpan>> SpansLeft(uint64_t size, const LoaderOptions& options,
                                         const std::vector<ElasticStage>& stages);

// This rank's (options.rank of options.world_size) plan for the rest of
// `epoch` after the stages, oldest first. options.batch_size, drop_last,
// partition, shuffle and seed must be those of the saved run.
Result<EpochPlan> PlanRemaining(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                                uint64_t epoch, const std::vector<ElasticStage>& stages);

}  // namespace stoker
