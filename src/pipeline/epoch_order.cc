// pipeline/epoch_order.cc — see epoch_order.h.
#include "pipeline/epoch_order.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/random.h"
#include "pipeline/mix_seed.h"

namespace stoker {

namespace {

// Fisher-Yates with our own generator: std::shuffle's output differs between
// standard libraries, and the plan must not.
template <typename T>
void Shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.Below(i)]);
}

// The block shuffle's cuts of a shard of n > 0 samples (planner.h): at
// phase + k * block inside (0, n); a first or last piece shorter than a
// block joins its neighbour. So a shard of n >= 2B samples gives blocks of
// B..2B-1 samples (2B..3B-1: two blocks), one of B..2B-1 is one block, and a
// batch of b consecutive plan positions meets at most ceil(b / B) + 1
// blocks; a shard of n < B samples is one block. A shard of 2B..3B-1
// samples has room for one cut: its phase is drawn where that cut exists
// (PhaseSpan), so it is never one whole-shard block.
uint64_t PhaseSpan(uint32_t n, uint32_t block) {
  return n >= 2 * block && n < 3 * block ? n - 2 * block + 1 : block;
}

template <typename Emit>
void CutShard(uint32_t n, uint32_t block, uint32_t phase, Emit emit) {
  uint32_t begin = 0;
  for (uint64_t cut = phase == 0 ? block : phase + uint64_t{block}; cut + block <= n; cut += block) {
    emit(begin, static_cast<uint32_t>(cut));
    begin = static_cast<uint32_t>(cut);
  }
  emit(begin, n);
}

// The mix in effect (planner.h): options.shuffle_mix for blocks of several
// samples; none for single samples (already permuted one by one) and for -1
// (auto) that reaches the planner unresolved.
uint32_t MixOf(const LoaderOptions& o) {
  return o.shuffle_block > 1 && o.shuffle_mix > 0 ? static_cast<uint32_t>(o.shuffle_mix) : 0;
}

// The last index i in [lo, hi) with starts[i] <= x (starts sorted, starts[lo] <= x).
size_t LastAtOrBefore(const std::vector<uint64_t>& starts, size_t lo, size_t hi, uint64_t x) {
  return static_cast<size_t>(std::upper_bound(starts.begin() + static_cast<std::ptrdiff_t>(lo),
                                              starts.begin() + static_cast<std::ptrdiff_t>(hi), x) -
                             starts.begin() - 1);
}

// The mix (planner.h): blocks j of a list whose first positions are `start`
// (`end` one past the last block's) form runs of `mix` consecutive blocks,
// and the positions of each run are permuted among themselves by an
// IndexShuffle keyed by `key` and the run's index. Position x of block j
// moves to the returned position, in the returned block (of the same run).
struct Spot {
  size_t block;
  uint64_t pos;
};
Spot MixWithin(const std::vector<uint64_t>& start, uint64_t end, size_t j, uint64_t x, size_t mix, uint64_t key) {
  const size_t run = j / mix, a = run * mix, b = std::min(a + mix, start.size());
  const uint64_t lo = start[a], hi = b < start.size() ? start[b] : end;
  const uint64_t q = lo + IndexShuffle(hi - lo, MixSeed(key, run))(x - lo);
  return {LastAtOrBefore(start, a, b, q), q};
}

}  // namespace

Result<std::shared_ptr<const EpochOrder>> EpochOrder::Make(const std::vector<uint32_t>& samples_per_shard,
                                                           const LoaderOptions& options, uint64_t epoch) {
  auto order = std::make_shared<EpochOrder>();
  EpochOrder& o = *order;
  o.first_.assign(samples_per_shard.size() + 1, 0);
  for (size_t s = 0; s < samples_per_shard.size(); ++s) o.first_[s + 1] = o.first_[s] + samples_per_shard[s];
  const uint64_t total = o.first_.back();
  if (total == 0) return InvalidArgument("the dataset has no samples");
  if (options.shuffle_window < -1) {
    return InvalidArgument("shuffle_window must be -1 (auto), 0 (the whole dataset) or a number of shards > 0, not " +
                           std::to_string(options.shuffle_window));
  }
  if (options.shuffle_mix < -1) {
    return InvalidArgument("shuffle_mix must be -1 (auto), 0 (a block's samples in member order) or a number of "
                           "blocks > 0, not " + std::to_string(options.shuffle_mix));
  }
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
  } else if (options.shuffle_window > 0) {
    // Windows of shards (planner.h); 0, and -1 (auto) that reaches the
    // planner unresolved, fall through to the whole-dataset orders below.
    o.MakeWindowed(samples_per_shard, options, rng.Next());
  } else if (options.shuffle_block > 1) {
    // The block shuffle (planner.h), its cuts as CutShard says, each shard's
    // phase drawn in shard order from the epoch's stream.
    o.kind_ = Kind::kBlocks;
    const uint32_t block = static_cast<uint32_t>(options.shuffle_block);
    o.mix_ = MixOf(options);
    std::vector<Block> blocks;
    for (uint32_t s = 0; s < samples_per_shard.size(); ++s) {
      const uint32_t n = samples_per_shard[s];
      if (n == 0) continue;
      // Mixed blocks are cut at multiples of the block (phase 0): their
      // samples are spread over the run anyway, and for Parquet the cuts
      // then fall on row group edges, so each row group is decoded once an
      // epoch and a run of M blocks holds about M row groups, not 2M.
      const uint32_t phase = o.mix_ > 0 ? 0 : static_cast<uint32_t>(rng.Below(PhaseSpan(n, block)));
      CutShard(n, block, phase, [&](uint32_t begin, uint32_t end) { blocks.push_back({s, begin, end}); });
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
    if (o.mix_ > 0) o.mix_key_ = rng.Next();  // drawn last: orders without the mix are as before
  } else {
    // shuffle_block -1 (auto) that reaches the planner unresolved (Loader::Create
    // resolves it from where the shards are) means single samples.
    o.kind_ = Kind::kPermuted;
    o.shuffle_ = IndexShuffle(total, rng.Next());
  }
  return std::shared_ptr<const EpochOrder>(std::move(order));
}

void EpochOrder::MakeWindowed(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                              uint64_t key) {
  // Keys drawn from the epoch's: one for the shard permutation, one that
  // keys every window's permutation with the window's index, one that keys
  // every shard's block phase with the shard's id (so a window's blocks are
  // cut without walking the shards before it, as the whole-dataset block
  // order's stream of phases would need).
  kind_ = Kind::kWindowed;
  const size_t shards = samples_per_shard.size();
  window_ = std::min(static_cast<size_t>(options.shuffle_window), shards);
  block_ = options.shuffle_block > 1 ? static_cast<uint32_t>(options.shuffle_block) : 1;
  mix_ = MixOf(options);
  window_key_ = MixSeed(key, 1);
  phase_key_ = MixSeed(key, 2);
  mix_key_ = MixSeed(key, 4);
  const IndexShuffle shard_perm(shards, MixSeed(key, 3));
  shard_perm_.resize(shards);
  perm_first_.assign(shards + 1, 0);
  for (size_t i = 0; i < shards; ++i) {
    shard_perm_[i] = static_cast<uint32_t>(shard_perm(i));
    perm_first_[i + 1] = perm_first_[i] + samples_per_shard[shard_perm_[i]];
  }
}

size_t EpochOrder::num_windows() const {
  return kind_ == Kind::kWindowed ? (shard_perm_.size() + window_ - 1) / window_ : 1;
}

size_t EpochOrder::WindowEnd(size_t w) const { return std::min(shard_perm_.size(), (w + 1) * window_); }

size_t EpochOrder::WindowOf(uint64_t p) const {
  if (kind_ != Kind::kWindowed) return 0;
  // The last window starting at or before p: windows of empty shards only
  // share their successor's start and are passed over.
  size_t lo = 0, hi = num_windows();  // perm_first_[WindowBegin(lo)] <= p < perm_first_[WindowBegin(hi)]
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (perm_first_[WindowBegin(mid)] <= p ? lo : hi) = mid;
  }
  return lo;
}

std::pair<uint64_t, uint64_t> EpochOrder::WindowPositions(size_t w) const {
  if (kind_ != Kind::kWindowed) return {0, size()};
  return {perm_first_[WindowBegin(w)], perm_first_[WindowEnd(w)]};
}

std::vector<uint32_t> EpochOrder::WindowShards(size_t w) const {
  if (kind_ != Kind::kWindowed) {
    std::vector<uint32_t> all(num_shards());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return std::vector<uint32_t>(shard_perm_.begin() + static_cast<std::ptrdiff_t>(WindowBegin(w)),
                               shard_perm_.begin() + static_cast<std::ptrdiff_t>(WindowEnd(w)));
}

IndexShuffle EpochOrder::WindowShuffle(size_t w, uint64_t n) const { return IndexShuffle(n, MixSeed(window_key_, w)); }

std::shared_ptr<const EpochOrder::WindowTable> EpochOrder::BuildTable(size_t w) const {
  // The window's blocks, its shards in permuted order, each cut as the
  // whole-dataset block order cuts it (CutShard) at a phase keyed by the
  // shard and the epoch; then permuted by the window's IndexShuffle.
  std::vector<Block> blocks;
  blocks.reserve((perm_first_[WindowEnd(w)] - perm_first_[WindowBegin(w)]) / block_ + window_);
  for (size_t i = WindowBegin(w); i < WindowEnd(w); ++i) {
    const uint32_t s = shard_perm_[i];
    const uint32_t n = static_cast<uint32_t>(first_[s + 1] - first_[s]);
    if (n == 0) continue;
    const uint32_t phase =
        mix_ > 0 ? 0 : static_cast<uint32_t>(SplitMix64(MixSeed(phase_key_, s)).Below(PhaseSpan(n, block_)));
    CutShard(n, block_, phase, [&](uint32_t begin, uint32_t end) { blocks.push_back({s, begin, end}); });
  }
  auto table = std::make_shared<WindowTable>();
  table->blocks.resize(blocks.size());
  table->start.resize(blocks.size());
  const IndexShuffle perm = WindowShuffle(w, blocks.size());
  uint64_t pos = 0;
  for (size_t j = 0; j < blocks.size(); ++j) {
    table->blocks[j] = blocks[perm(j)];
    table->start[j] = pos;
    pos += table->blocks[j].end - table->blocks[j].begin;
  }
  return table;
}

std::shared_ptr<const EpochOrder::WindowTable> EpochOrder::TableOf(size_t w) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (CachedTable& c : cache_) {
      if (c.window == w) {
        c.used = ++tick_;
        return c.table;
      }
    }
  }
  std::shared_ptr<const WindowTable> table = BuildTable(w);
  std::lock_guard<std::mutex> lock(cache_mu_);
  CachedTable* oldest = &cache_[0];
  for (CachedTable& c : cache_) {
    if (c.window == w) {  // another thread built it meanwhile: keep one
      c.used = ++tick_;
      return c.table;
    }
    if (c.used < oldest->used) oldest = &c;
  }
  *oldest = CachedTable{w, ++tick_, table};
  return table;
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

std::shared_ptr<const EpochOrder> EpochOrder::Computed(const std::vector<uint32_t>& samples_per_shard,
                                                       std::shared_ptr<const OrderFunction> f) {
  auto o = std::make_shared<EpochOrder>();
  o->kind_ = Kind::kComputed;
  o->first_.assign(samples_per_shard.size() + 1, 0);
  for (size_t s = 0; s < samples_per_shard.size(); ++s) o->first_[s + 1] = o->first_[s] + samples_per_shard[s];
  o->computed_ = std::move(f);
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
      size_t j = LastAtOrBefore(block_start_, 0, block_start_.size(), p);
      if (mix_ > 0) {
        const Spot spot = MixWithin(block_start_, size(), j, p, mix_, mix_key_);
        j = spot.block;
        p = spot.pos;
      }
      const Block& b = blocks_[j];
      const uint32_t sample = b.begin + static_cast<uint32_t>(p - block_start_[j]);
      return SampleRef{b.shard, sample, first_[b.shard] + sample};
    }
    case Kind::kWindowed: {
      const size_t w = WindowOf(p);
      const uint64_t begin = perm_first_[WindowBegin(w)];
      if (block_ == 1) {
        // The window's samples permuted, then the permuted shard holding
        // the one drawn, by its position prefix.
        const uint64_t q = begin + WindowShuffle(w, perm_first_[WindowEnd(w)] - begin)(p - begin);
        const size_t i = LastAtOrBefore(perm_first_, WindowBegin(w), WindowEnd(w), q);
        const uint32_t s = shard_perm_[i];
        const uint32_t sample = static_cast<uint32_t>(q - perm_first_[i]);
        return SampleRef{s, sample, first_[s] + sample};
      }
      const std::shared_ptr<const WindowTable> table = TableOf(w);
      uint64_t x = p - begin;  // the position in the window
      size_t j = LastAtOrBefore(table->start, 0, table->start.size(), x);
      if (mix_ > 0) {
        const Spot spot =
            MixWithin(table->start, perm_first_[WindowEnd(w)] - begin, j, x, mix_, MixSeed(mix_key_, w));
        j = spot.block;
        x = spot.pos;
      }
      const Block& b = table->blocks[j];
      const uint32_t sample = b.begin + static_cast<uint32_t>(x - table->start[j]);
      return SampleRef{b.shard, sample, first_[b.shard] + sample};
    }
    case Kind::kComputed:
      return computed_->At(p);
    case Kind::kListed:
      break;
  }
  return listed_[static_cast<size_t>(p)];
}

}  // namespace stoker
