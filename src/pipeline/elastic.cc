// pipeline/elastic.cc — see elastic.h.
#include "pipeline/elastic.h"

#include <algorithm>

namespace stoker {

namespace {

struct Part {
  std::vector<SampleRef> samples;
  int64_t batches = 0;
  int64_t padded = 0;
};

// PlanEpoch's cut of an order among `world` ranks, for one rank.
Result<Part> Cut(const std::vector<SampleRef>& order, const LoaderOptions& o, int world, int rank) {
  const uint64_t total = order.size();
  STOKER_ASSIGN_OR_RETURN(RankShare share, ShareOfRank(total, o, world, rank, "left in this epoch"));
  Part p;
  for (uint64_t i = share.begin; i < share.begin + share.count; ++i) {
    p.samples.push_back(order[i % total]);
    p.padded += i >= total;
  }
  p.batches = share.batches;
  return p;
}

}  // namespace

Result<EpochPlan> PlanRemaining(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                                uint64_t epoch, const std::vector<ElasticStage>& stages) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is outside world_size " +
                           std::to_string(options.world_size));
  }
  // The epoch's global order: PlanEpoch for one rank, one sample per batch, nothing dropped.
  LoaderOptions whole = options;
  whole.rank = 0;
  whole.world_size = 1;
  whole.batch_size = 1;
  whole.drop_last = false;
  whole.partition = PartitionPolicy::kDropRemainder;
  STOKER_ASSIGN_OR_RETURN(EpochPlan global, PlanEpoch(samples_per_shard, whole, epoch));
  std::vector<SampleRef> order = std::move(global.samples);
  const uint64_t bs = static_cast<uint64_t>(options.batch_size);
  for (const ElasticStage& st : stages) {
    if (st.world_size < 1 || st.next_batch < 0) return InvalidArgument("bad elastic stage in the loader state");
    std::vector<SampleRef> rest;
    for (int r = 0; r < st.world_size; ++r) {
      STOKER_ASSIGN_OR_RETURN(Part part, Cut(order, options, st.world_size, r));
      if (st.next_batch > part.batches) return InvalidArgument("loader state next_batch is out of range");
      const uint64_t done = std::min<uint64_t>(part.samples.size(), static_cast<uint64_t>(st.next_batch) * bs);
      rest.insert(rest.end(), part.samples.begin() + static_cast<long>(done), part.samples.end());
    }
    order = std::move(rest);
  }
  STOKER_ASSIGN_OR_RETURN(Part mine, Cut(order, options, options.world_size, options.rank));
  if (mine.batches == 0) {
    return InvalidArgument("each rank has fewer than batch_size samples left in this epoch with drop_last");
  }
  EpochPlan plan;
  plan.info.dataset_samples = global.info.dataset_samples;
  plan.info.num_shards = global.info.num_shards;
  plan.info.rank_samples = static_cast<int64_t>(mine.samples.size());
  plan.info.batches = mine.batches;
  plan.info.padded_samples = mine.padded;
  const uint64_t delivered = std::min<uint64_t>(order.size(), mine.samples.size() * options.world_size);
  plan.info.dropped_samples =
      options.partition == PartitionPolicy::kExact ? 0 : static_cast<int64_t>(order.size() - delivered);
  plan.samples = std::move(mine.samples);
  return plan;
}

}  // namespace stoker
