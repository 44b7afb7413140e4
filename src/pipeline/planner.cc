#include "pipeline/planner.h"

#include <algorithm>
#include <numeric>

#include "core/random.h"

namespace stoker {

namespace {

// Fisher-Yates with our own generator: std::shuffle's output differs between
// standard libraries, and the plan must not.
template <typename T>
void Shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.Below(i)]);
}

// The block shuffle's order (planner.h): each shard cut into blocks of at
// least B consecutive samples at a phase drawn per shard and epoch, the
// blocks permuted, each block's samples kept in member order.
std::vector<SampleRef> BlockOrder(const std::vector<uint32_t>& samples_per_shard, const std::vector<uint64_t>& first,
                                  uint32_t block, SplitMix64& rng) {
  struct Block {
    uint32_t shard, begin, end;
  };
  std::vector<Block> blocks;
  for (uint32_t s = 0; s < samples_per_shard.size(); ++s) {
    const uint32_t n = samples_per_shard[s];
    if (n == 0) continue;
    // Cuts at phase + k * block inside (0, n); a first or last piece shorter
    // than a block joins its neighbour. So a shard of n >= 2B samples gives
    // blocks of B..2B-1 samples (2B..3B-1: two blocks), one of B..2B-1 is one
    // block, and a batch of b consecutive plan positions meets at most
    // ceil(b / B) + 1 blocks; a shard of n < B samples is one block.
    // A shard of 2B..3B-1 samples has room for one cut: its phase is drawn
    // where that cut exists, so it is never one whole-shard block.
    const uint64_t span = n >= 2 * block && n < 3 * block ? n - 2 * block + 1 : block;
    const uint32_t phase = static_cast<uint32_t>(rng.Below(span));
    uint32_t begin = 0;
    for (uint64_t cut = phase == 0 ? block : phase + uint64_t{block}; cut + block <= n; cut += block) {
      blocks.push_back({s, begin, static_cast<uint32_t>(cut)});
      begin = static_cast<uint32_t>(cut);
    }
    blocks.push_back({s, begin, n});
  }
  Shuffle(blocks, rng);
  std::vector<SampleRef> order;
  order.reserve(first.back());
  for (const Block& b : blocks)
    for (uint32_t i = b.begin; i < b.end; ++i) order.push_back(SampleRef{b.shard, i, first[b.shard] + i});
  return order;
}

}  // namespace

int AutoShuffleBlock(const LoaderOptions& options, bool remote) {
  if (options.shuffle_block != -1) return options.shuffle_block;
  return remote ? kRemoteShuffleBlock : 1;
}

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  // Chained, not XORed into one seed: each word is mixed into the hash of the
  // words before it, so nearby (seed, epoch) pairs give unrelated streams.
  const uint64_t h = SplitMix64(a).Next();
  const uint64_t h2 = SplitMix64(h ^ b).Next();
  return SplitMix64(h2 ^ c).Next();
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

  std::vector<uint64_t> first(samples_per_shard.size() + 1, 0);
  for (size_t s = 0; s < samples_per_shard.size(); ++s) first[s + 1] = first[s] + samples_per_shard[s];
  const uint64_t total = first.back();
  if (total == 0) return InvalidArgument("the dataset has no samples");

  auto ref_of = [&](uint32_t shard, uint32_t sample) { return SampleRef{shard, sample, first[shard] + sample}; };
  SplitMix64 rng(MixSeed(options.seed, epoch, 0x5EED));

  std::vector<SampleRef> order;
  // shuffle_block -1 (auto) that reaches the planner unresolved (Loader::Create
  // resolves it from where the shards are) means single samples.
  if (options.shuffle && options.shuffle_buffer == 0 && options.shuffle_block > 1) {
    order = BlockOrder(samples_per_shard, first, static_cast<uint32_t>(options.shuffle_block), rng);
  } else {
    order.reserve(total);
    std::vector<uint32_t> shard_order(samples_per_shard.size());
    std::iota(shard_order.begin(), shard_order.end(), 0);
    if (options.shuffle && options.shuffle_buffer > 0) Shuffle(shard_order, rng);
    for (uint32_t s : shard_order)
      for (uint32_t i = 0; i < samples_per_shard[s]; ++i) order.push_back(ref_of(s, i));
  }

  if (options.shuffle && options.shuffle_buffer == 0 && options.shuffle_block <= 1) {
    Shuffle(order, rng);
  } else if (options.shuffle && options.shuffle_buffer > 0) {
    // Stream through a buffer: emit a random buffered sample for each arrival.
    std::vector<SampleRef> buffer, out;
    out.reserve(total);
    const size_t cap = static_cast<size_t>(options.shuffle_buffer);
    for (const SampleRef& r : order) {
      if (buffer.size() < cap) {
        buffer.push_back(r);
        continue;
      }
      size_t j = rng.Below(buffer.size());
      out.push_back(buffer[j]);
      buffer[j] = r;
    }
    Shuffle(buffer, rng);
    out.insert(out.end(), buffer.begin(), buffer.end());
    order = std::move(out);
  }

  STOKER_ASSIGN_OR_RETURN(RankShare share, ShareOfRank(total, options, options.world_size, options.rank,
                                                        "in the dataset"));
  EpochPlan plan;
  plan.info.dataset_samples = static_cast<int64_t>(total);
  plan.info.num_shards = static_cast<int64_t>(samples_per_shard.size());
  plan.samples.reserve(share.count);
  for (uint64_t i = share.begin; i < share.begin + share.count; ++i) plan.samples.push_back(order[i % total]);
  plan.info.rank_samples = static_cast<int64_t>(share.count);
  plan.info.batches = share.batches;
  // Samples no rank delivers this epoch: the remainder cut to equalize ranks
  // plus each rank's partial last batch under drop_last (none when exact).
  const uint64_t world = static_cast<uint64_t>(options.world_size);
  plan.info.dropped_samples = options.partition == PartitionPolicy::kExact
                                  ? 0
                                  : static_cast<int64_t>(total - std::min<uint64_t>(total, share.count * world));
  plan.info.padded_samples = 0;
  for (uint64_t i = share.begin; i < share.begin + share.count; ++i) plan.info.padded_samples += i >= total;
  return plan;
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
  plan.info.num_shards = 1;
  return plan;
}

}  // namespace stoker
