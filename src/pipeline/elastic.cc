// pipeline/elastic.cc — see elastic.h.
#include "pipeline/elastic.h"

#include <algorithm>

#include "pipeline/mix_order.h"

namespace stoker {

Result<std::vector<OrderSpan>> SpansLeft(uint64_t size, const LoaderOptions& options,
                                         const std::vector<ElasticStage>& stages) {
  std::vector<OrderSpan> left = {{0, size}};
  const uint64_t bs = static_cast<uint64_t>(options.batch_size);
  for (const ElasticStage& st : stages) {
    if (st.world_size < 1 || st.next_batch < 0) return InvalidArgument("bad elastic stage in the loader state");
    uint64_t total = 0;
    for (const OrderSpan& s : left) total += s.count;
    std::vector<OrderSpan> rest;
    for (int r = 0; r < st.world_size; ++r) {
      STOKER_ASSIGN_OR_RETURN(RankShare part, ShareOfRank(total, options, st.world_size, r, "left in this epoch"));
      if (st.next_batch > part.batches) return InvalidArgument("loader state next_batch is out of range");
      const uint64_t done = std::min<uint64_t>(part.count, static_cast<uint64_t>(st.next_batch) * bs);
      for (const OrderSpan& s : SliceSpans(left, total, part.begin + done, part.count - done)) {
        if (!rest.empty() && rest.back().first + rest.back().count == s.first) {
          rest.back().count += s.count;
        } else {
          rest.push_back(s);
        }
      }
    }
    left = std::move(rest);
  }
  return left;
}

Result<EpochPlan> PlanRemaining(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                                uint64_t epoch, const std::vector<ElasticStage>& stages) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is outside world_size " +
                           std::to_string(options.world_size));
  }
  if (options.batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  // The epoch's global order, as PlanEpoch computes it; what is left of it is
  // kept as spans of its positions, never as a list of samples.
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const EpochOrder> order,
                          MakeEpochOrder(samples_per_shard, options, epoch));
  STOKER_ASSIGN_OR_RETURN(std::vector<OrderSpan> left, SpansLeft(order->size(), options, stages));
  STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanShare(std::move(order), left, options, "left in this epoch"));
  if (plan.info.batches == 0) {
    return InvalidArgument("each rank has fewer than batch_size samples left in this epoch with drop_last");
  }
  return plan;
}

}  // namespace stoker
