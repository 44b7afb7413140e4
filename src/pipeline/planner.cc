#include "pipeline/planner.h"

#include <algorithm>

#include "pipeline/mix_order.h"

namespace stoker {

int AutoShuffleBlock(const LoaderOptions& options, bool remote) {
  if (options.shuffle_block != -1) return options.shuffle_block;
  return remote ? kRemoteShuffleBlock : 1;
}

int AutoShuffleWindow(const LoaderOptions& options, uint64_t table_bytes, uint64_t index_bytes, size_t shards) {
  if (options.shuffle_window != -1) return options.shuffle_window;
  if (!options.shuffle || options.shuffle_buffer > 0 || table_bytes <= index_bytes || shards == 0) return 0;
  const uint64_t per_shard = std::max<uint64_t>(1, table_bytes / shards);
  const uint64_t k = std::max<uint64_t>(kMinShuffleWindow, index_bytes / 2 / per_shard);
  return k >= shards ? 0 : static_cast<int>(k);
}

int AutoShuffleMix(const LoaderOptions& options, bool parquet) {
  if (options.shuffle_mix != -1) return options.shuffle_mix;
  return parquet && options.shuffle && options.shuffle_buffer == 0 && options.shuffle_block > 1 ? kParquetMixBlocks
                                                                                                 : 0;
}

void SetSourceOrders(const LoaderOptions& user, const std::vector<int>& parquet_blocks, const std::vector<bool>& remote,
                     int parquet_mix, MixOptions* mix) {
  mix->shuffle_blocks.clear();
  mix->shuffle_mixes.clear();
  LoaderOptions one;
  one.shuffle = user.shuffle;
  one.shuffle_buffer = user.shuffle_buffer;
  for (size_t s = 0; s < parquet_blocks.size(); ++s) {
    const bool parquet = parquet_blocks[s] > 0;
    one.shuffle_block = user.shuffle_block == -1 && parquet ? parquet_blocks[s] : user.shuffle_block;
    one.shuffle_block = AutoShuffleBlock(one, remote[s]);
    one.shuffle_mix = user.shuffle_mix;
    const int auto_mix = AutoShuffleMix(one, parquet);
    mix->shuffle_blocks.push_back(one.shuffle_block);
    mix->shuffle_mixes.push_back(user.shuffle_mix == -1 && parquet ? std::min(auto_mix, parquet_mix) : auto_mix);
  }
}

std::string DescribeOrder(const LoaderOptions& o) {
  if (!o.shuffle) return "shard order";
  if (o.shuffle_buffer > 0) {
    return "shards shuffled, then a buffer of " + std::to_string(o.shuffle_buffer) + " samples";
  }
  std::string unit = o.shuffle_block > 1 ? "blocks of " + std::to_string(o.shuffle_block) + " samples" : "samples";
  if (o.shuffle_block > 1 && o.shuffle_mix > 0) {
    unit += o.shuffle_mix == 1 ? std::string(" (the samples of each block mixed)")
                               : " (the samples of every " + std::to_string(o.shuffle_mix) + " consecutive blocks mixed)";
  }
  if (o.shuffle_window > 0) return unit + " permuted within windows of " + std::to_string(o.shuffle_window) + " shards";
  return unit + " permuted over the whole dataset";
}

std::string DescribeParquetMix(const LoaderOptions& o, const std::vector<uint32_t>& rows) {
  if (!o.shuffle || o.shuffle_buffer > 0 || o.shuffle_block <= 1) return "";
  // Blocks as the mix cuts them (epoch_order.cc's CutShard at phase 0): a
  // file of n rows gives max(1, floor(n / B)).
  const uint64_t block = static_cast<uint64_t>(o.shuffle_block);
  uint64_t blocks = 0, total = 0;
  for (uint32_t n : rows) {
    total += n;
    if (n > 0) blocks += std::max<uint64_t>(1, n / block);
  }
  const std::string fix = "write the rows shuffled for a uniform mix (pyarrow: "
                          "table.take(numpy.random.default_rng().permutation(table.num_rows)))";
  if (o.shuffle_mix <= 0) {
    return "; a block's rows stay in file order (shuffle_mix 0): rows sorted in the files (by label, by source) "
           "give batches of one or two runs of that order; let the auto mix hold row groups decoded (a larger "
           "memory_budget), or " + fix;
  }
  const uint64_t mix = static_cast<uint64_t>(o.shuffle_mix);
  if (blocks <= mix && o.shuffle_window <= 0) return "";
  const uint64_t drawn = std::min(mix, blocks);
  return "; a batch draws its rows from " + std::to_string(drawn) + (drawn == 1 ? " block" : " blocks") +
         " of row groups (about " +
         std::to_string(std::min(total, mix * block)) + " of " + std::to_string(total) +
         " rows): rows sorted in the files (by label, by source) give a batch at most that many runs of their order; " +
         fix;
}

Result<RankShare> ShareOfRank(uint64_t total, const LoaderOptions& options, int world, int rank,
                              const std::string& left) {
  const uint64_t w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  const uint64_t bs = static_cast<uint64_t>(options.batch_size);
  if (total == 0) return InvalidArgument("no samples " + left);
  RankShare share;
  if (options.partition == PartitionPolicy::kExact) {
    if (options.drop_last) {
      return InvalidArgument("partition exact delivers every sample, so drop_last must be false");
    }
    // The first total % w ranks take one sample more; parts stay contiguous
    // and in rank order, so their concatenation is the order itself.
    const uint64_t base = total / w, extra = total % w;
    share.begin = r * base + std::min(r, extra);
    share.count = base + (r < extra ? 1 : 0);
    share.batches = static_cast<int64_t>((base + (extra > 0 ? 1 : 0) + bs - 1) / bs);
    return share;
  }
  const uint64_t per_rank = options.partition == PartitionPolicy::kPadRepeat ? (total + w - 1) / w : total / w;
  if (per_rank == 0) {
    return InvalidArgument(std::to_string(total) + " samples " + left + ", fewer than world_size " +
                           std::to_string(w) + "; use partition pad or exact");
  }
  const uint64_t batches = options.drop_last ? per_rank / bs : (per_rank + bs - 1) / bs;
  if (batches == 0) {
    return InvalidArgument("each rank has " + std::to_string(per_rank) + " samples " + left +
                           ", fewer than batch_size " + std::to_string(bs) + " with drop_last");
  }
  share.begin = per_rank * r;
  share.count = std::min<uint64_t>(per_rank, batches * bs);
  share.batches = static_cast<int64_t>(batches);
  return share;
}

SampleRef EpochPlan::At(int64_t i) const {
  if (!strided) return order->At(OrderPosition(i));
  const uint64_t u = static_cast<uint64_t>(i);
  return SampleRef{0, 0, first + (u / micro) * global_batch + rank_offset + u % micro};
}

uint64_t EpochPlan::OrderPosition(int64_t i) const {
  const uint64_t u = static_cast<uint64_t>(i);
  size_t k = 0;
  if (spans.size() > 2) {
    k = static_cast<size_t>(std::upper_bound(span_start.begin(), span_start.end(), u) - span_start.begin() - 1);
  } else if (spans.size() == 2 && u >= span_start[1]) {
    k = 1;
  }
  return spans[k].first + (u - span_start[k]);
}

std::vector<OrderSpan> SliceSpans(const std::vector<OrderSpan>& spans, uint64_t total, uint64_t begin,
                                  uint64_t count) {
  std::vector<OrderSpan> out;
  if (total == 0) return out;
  // Where each span starts in the list, to find the one holding `begin`.
  std::vector<uint64_t> start(spans.size());
  uint64_t at = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    start[k] = at;
    at += spans[k].count;
  }
  uint64_t pos = begin % total;
  size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), pos) - start.begin() - 1);
  while (count > 0) {
    while (pos - start[k] >= spans[k].count) {  // past this span (or an empty one): the next, wrapping
      if (++k == spans.size()) k = 0, pos = 0;
    }
    const uint64_t off = pos - start[k];
    const uint64_t take = std::min(count, spans[k].count - off);
    const uint64_t first = spans[k].first + off;
    if (!out.empty() && out.back().first + out.back().count == first) {
      out.back().count += take;
    } else {
      out.push_back({first, take});
    }
    count -= take;
    pos += take;
  }
  return out;
}

Result<EpochPlan> PlanShare(std::shared_ptr<const EpochOrder> order, const std::vector<OrderSpan>& spans,
                            const LoaderOptions& options, const std::string& left) {
  uint64_t total = 0;
  for (const OrderSpan& s : spans) total += s.count;
  STOKER_ASSIGN_OR_RETURN(RankShare share, ShareOfRank(total, options, options.world_size, options.rank, left));
  EpochPlan plan;
  plan.info.dataset_samples = static_cast<int64_t>(order->size());
  plan.info.num_shards = static_cast<int64_t>(order->num_shards());
  plan.spans = SliceSpans(spans, total, share.begin, share.count);
  plan.span_start.reserve(plan.spans.size());
  uint64_t at = 0;
  for (const OrderSpan& s : plan.spans) {
    plan.span_start.push_back(at);
    at += s.count;
  }
  plan.order = std::move(order);
  plan.info.rank_samples = static_cast<int64_t>(share.count);
  plan.info.batches = share.batches;
  // Samples no rank delivers: the remainder cut to equalize ranks plus each
  // rank's partial last batch under drop_last (none when exact). Positions
  // past the end are the pad policy's repeats.
  const uint64_t world = static_cast<uint64_t>(options.world_size);
  plan.info.dropped_samples = options.partition == PartitionPolicy::kExact
                                  ? 0
                                  : static_cast<int64_t>(total - std::min<uint64_t>(total, share.count * world));
  const uint64_t end = share.begin + share.count;
  plan.info.padded_samples = static_cast<int64_t>(end <= total ? 0 : std::min(share.count, end - total));
  return plan;
}

Result<EpochPlan> PlanEpoch(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                            uint64_t epoch) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is outside world_size " +
                           std::to_string(options.world_size));
  }
  if (options.batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  if (options.shuffle_block == 0 || options.shuffle_block < -1) {
    return InvalidArgument("shuffle_block must be -1 (auto), 1 (single samples) or a block size > 1, not " +
                           std::to_string(options.shuffle_block));
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const EpochOrder> order,
                          MakeEpochOrder(samples_per_shard, options, epoch));
  const std::vector<OrderSpan> whole = {{0, order->size()}};
  return PlanShare(std::move(order), whole, options, "in the dataset");
}

Result<EpochPlan> PlanTokenRun(int64_t total, int64_t consumed, const LoaderOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is outside world_size " +
                           std::to_string(options.world_size));
  }
  if (options.batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  if (consumed < 0 || consumed > total) {
    return InvalidArgument("consumed_samples " + std::to_string(consumed) + " is outside the dataset's " +
                           std::to_string(total) + " samples");
  }
  const uint64_t micro = static_cast<uint64_t>(options.batch_size);
  const uint64_t global = micro * static_cast<uint64_t>(options.world_size);
  EpochPlan plan;
  plan.strided = true;
  plan.first = static_cast<uint64_t>(consumed);
  plan.global_batch = global;
  plan.micro = micro;
  plan.rank_offset = micro * static_cast<uint64_t>(options.rank);
  const uint64_t left = static_cast<uint64_t>(total - consumed);
  const uint64_t whole = left / global, rest = left % global;
  plan.info.dataset_samples = total;
  if (options.partition == PartitionPolicy::kExact && rest > 0) {
    // The partial last global batch too, as megatron's sampler hands it out
    // with drop_last=False: rank r takes its micro batch's place in it, so its
    // part is short or empty. Every rank still takes that step.
    const uint64_t mine = std::min(micro, rest - std::min(rest, plan.rank_offset));
    plan.info.batches = static_cast<int64_t>(whole + 1);
    plan.info.rank_samples = static_cast<int64_t>(whole * micro + mine);
    plan.info.dropped_samples = 0;
  } else {
    plan.info.batches = static_cast<int64_t>(whole);
    plan.info.rank_samples = static_cast<int64_t>(whole * micro);
    plan.info.dropped_samples = static_cast<int64_t>(rest);
  }
  // The files the run reads: one .bin per dataset of a blend.
  plan.info.num_shards = static_cast<int64_t>(std::max<size_t>(1, options.tokens.paths.size()));
  return plan;
}

}  // namespace stoker
