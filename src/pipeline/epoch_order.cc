// pipeline/epoch_order.cc — see epoch_order.h.
#include "pipeline/epoch_order.h"

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

}  // namespace

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  // Chained, not XORed into one seed: each word is mixed into the hash of the
  // words before it, so nearby (seed, epoch) pairs give unrelated streams.
  const uint64_t h = SplitMix64(a).Next();
  const uint64_t h2 = SplitMix64(h ^ b).Next();
  return SplitMix64(h2 ^ c).Next();
}

Result<std::shared_ptr<const EpochOrder>> EpochOrder::Make(const std::vector<uint32_t>& samples_per_shard,
                                                           const LoaderOptions& options, uint64_t epoch) {
  auto order = std::make_shared<EpochOrder>();
  EpochOrder& o = *order;
  o.first_.assign(samples_per_shard.size() + 1, 0);
  for (size_t s = 0; s < samples_per_shard.size(); ++s) o.first_[s + 1] = o.first_[s] + samples_per_shard[s];
  const uint64_t total = o.first_.back();
  if (total == 0) return InvalidArgument("the dataset has no samples");
  SplitMix64 rng(MixSeed(options.seed, epoch, 0x5EED));

  if (!options.shuffle) {
    o.kind_ = Kind::kShardOrder;
  } else if (options.shuffle_buffer > 0) {
    // Shards permuted, then streamed through a buffer: emit a random buffered
    // sample for each arrival.
    o.kind_ = Kind::kListed;
    std::vector<uint32_t> shard_order(samples_per_shard.size());
    std::iota(shard_order.begin(), shard_order.end(), 0);
    Shuffle(shard_order, rng);
    std::vector<SampleRef> buffer;
    o.listed_.reserve(total);
    const size_t cap = static_cast<size_t>(options.shuffle_buffer);
    for (uint32_t s : shard_order) {
      for (uint32_t i = 0; i < samples_per_shard[s]; ++i) {
        const SampleRef r{s, i, o.first_[s] + i};
        if (buffer.size() < cap) {
          buffer.push_back(r);
          continue;
        }
        const size_t j = rng.Below(buffer.size());
        o.listed_.push_back(buffer[j]);
        buffer[j] = r;
      }
    }
    Shuffle(buffer, rng);
    o.listed_.insert(o.listed_.end(), buffer.begin(), buffer.end());
  } else if (options.shuffle_block > 1) {
    // The block shuffle (planner.h). Cuts at phase + k * block inside (0, n);
    // a first or last piece shorter than a block joins its neighbour. So a
    // shard of n >= 2B samples gives blocks of B..2B-1 samples (2B..3B-1: two
    // blocks), one of B..2B-1 is one block, and a batch of b consecutive plan
    // positions meets at most ceil(b / B) + 1 blocks; a shard of n < B
    // samples is one block. A shard of 2B..3B-1 samples has room for one cut:
    // its phase is drawn where that cut exists, so it is never one
    // whole-shard block.
    o.kind_ = Kind::kBlocks;
    const uint32_t block = static_cast<uint32_t>(options.shuffle_block);
    std::vector<Block> blocks;
    for (uint32_t s = 0; s < samples_per_shard.size(); ++s) {
      const uint32_t n = samples_per_shard[s];
      if (n == 0) continue;
      const uint64_t span = n >= 2 * block && n < 3 * block ? n - 2 * block + 1 : block;
      const uint32_t phase = static_cast<uint32_t>(rng.Below(span));
      uint32_t begin = 0;
      for (uint64_t cut = phase == 0 ? block : phase + uint64_t{block}; cut + block <= n; cut += block) {
        blocks.push_back({s, begin, static_cast<uint32_t>(cut)});
        begin = static_cast<uint32_t>(cut);
      }
      blocks.push_back({s, begin, n});
    }
    // The blocks in plan order, by the same bijection as single samples,
    // over block indices; each block's samples stay in member order.
    const IndexShuffle perm(blocks.size(), rng.Next());
    o.blocks_.resize(blocks.size());
    o.block_start_.resize(blocks.size());
    uint64_t pos = 0;
    for (size_t j = 0; j < blocks.size(); ++j) {
      o.blocks_[j] = blocks[perm(j)];
      o.block_start_[j] = pos;
      pos += o.blocks_[j].end - o.blocks_[j].begin;
    }
  } else {
    // shuffle_block -1 (auto) that reaches the planner unresolved (Loader::Create
    // resolves it from where the shards are) means single samples.
    o.kind_ = Kind::kPermuted;
    o.shuffle_ = IndexShuffle(total, rng.Next());
  }
  return std::shared_ptr<const EpochOrder>(std::move(order));
}

std::shared_ptr<const EpochOrder> EpochOrder::Listed(const std::vector<uint32_t>& samples_per_shard,
                                                     std::vector<SampleRef> order) {
  auto o = std::make_shared<EpochOrder>();
  o->kind_ = Kind::kListed;
  o->first_.assign(samples_per_shard.size() + 1, 0);
  for (size_t s = 0; s < samples_per_shard.size(); ++s) o->first_[s + 1] = o->first_[s] + samples_per_shard[s];
  o->listed_ = std::move(order);
  return o;
}

SampleRef EpochOrder::RefOf(uint64_t g) const {
  // The last shard whose first sample is at or before g: shards holding no
  // samples share their successor's start and are passed over.
  const auto it = std::upper_bound(first_.begin(), first_.end(), g) - 1;
  const uint32_t s = static_cast<uint32_t>(it - first_.begin());
  return SampleRef{s, static_cast<uint32_t>(g - *it), g};
}

SampleRef EpochOrder::At(uint64_t p) const {
  switch (kind_) {
    case Kind::kShardOrder:
      return RefOf(p);
    case Kind::kPermuted:
      return RefOf(shuffle_(p));
    case Kind::kBlocks: {
      const size_t j = static_cast<size_t>(std::upper_bound(block_start_.begin(), block_start_.end(), p) -
                                           block_start_.begin() - 1);
      const Block& b = blocks_[j];
      const uint32_t sample = b.begin + static_cast<uint32_t>(p - block_start_[j]);
      return SampleRef{b.shard, sample, first_[b.shard] + sample};
    }
    case Kind::kListed:
      break;
  }
  return listed_[static_cast<size_t>(p)];
}

}  // namespace stoker
