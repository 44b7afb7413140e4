// pipeline/mix_order.cc — see mix_order.h.
#include "pipeline/mix_order.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "pipeline/index_shuffle.h"
#include "pipeline/mix_seed.h"
#include "pipeline/shard_indexes.h"

namespace stoker {

Result<std::vector<uint64_t>> EpochCounts(const MixOptions& mix, const std::vector<uint64_t>& samples) {
  const size_t n = samples.size();
  if (mix.weights.size() != n || (!mix.choose.empty() && mix.choose.size() != n)) {
    return InvalidArgument("a mixture of " + std::to_string(n) + " sources under law counts needs a repeat and a "
                           "choose for each source");
  }
  std::vector<uint64_t> out(n);
  uint64_t total = 0;
  for (size_t s = 0; s < n; ++s) {
    const int64_t choose = mix.choose.empty() ? -1 : mix.choose[s];
    const double repeat = mix.weights[s];
    if (choose < 0 && (!std::isfinite(repeat) || repeat < 0)) {
      return InvalidArgument("source '" + mix.names[s] + "' has repeat " + std::to_string(repeat) +
                             "; a repeat is a number >= 0");
    }
    out[s] = choose >= 0 ? static_cast<uint64_t>(choose)
                         : static_cast<uint64_t>(std::llround(repeat * static_cast<double>(samples[s])));
    total += out[s];
  }
  if (total == 0) return InvalidArgument("the mixture's epoch holds no samples: every source draws 0 (repeat/choose)");
  return out;
}

namespace {

// Keys of the mixture's own streams, apart from the orders' (epoch_order.cc).
constexpr uint64_t kPhaseKey = 0x4D49585048415345ULL;  // "MIXPHASE"
constexpr uint64_t kBlockKey = 0x4D4958424C4F434BULL;  // "MIXBLOCK"
constexpr uint64_t kPassKey = 0x4D49585041535345ULL;   // "MIXPASSE"

// Step 3's permutation: position p's place within its block of `block`
// positions (the last block of `length` may be short), keyed by `key` and the block.
uint64_t PermutedInBlock(uint64_t p, uint64_t block, uint64_t length, uint64_t key) {
  const uint64_t b = p / block, begin = b * block;
  return begin + IndexShuffle(std::min(block, length - begin), MixSeed(key, b))(p - begin);
}

// Weights as integers, so the tree's counts are exact: a source's sample
// count (proportion), its draws an epoch (counts: over an epoch of their sum
// the tree hands each source exactly its count), or its share of 2^40
// (SampleLawWeights).
Result<std::vector<uint64_t>> IntegerWeights(const LoaderOptions& o, const std::vector<uint64_t>& samples) {
  if (o.mix.law == MixLaw::kProportion) return samples;
  if (o.mix.law == MixLaw::kCounts) return EpochCounts(o.mix, samples);
  if (o.mix.weights.size() != samples.size()) {
    return InvalidArgument("a mixture of " + std::to_string(samples.size()) + " sources has " +
                           std::to_string(o.mix.weights.size()) + " weights");
  }
  return SampleLawWeights(o.mix);
}

}  // namespace

Result<std::vector<uint64_t>> SampleLawWeights(const MixOptions& mix) {
  const size_t n = mix.weights.size();
  double sum = 0;
  for (size_t s = 0; s < n; ++s) {
    const double w = mix.weights[s];
    if (!std::isfinite(w) || w < 0) {
      return InvalidArgument("source '" + (s < mix.names.size() ? mix.names[s] : std::to_string(s)) +
                             "' has weight " + std::to_string(w) + "; a weight is a number >= 0");
    }
    sum += w;
  }
  if (sum <= 0) return InvalidArgument("every source of the mixture has weight 0");
  std::vector<uint64_t> out(n);
  for (size_t s = 0; s < n; ++s) {
    const double w = mix.weights[s];
    out[s] = w <= 0 ? 0 : std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(w / sum * 0x1.0p40)));
  }
  return out;
}

Result<StreamMixOrder> StreamMixOrder::Make(const LoaderOptions& options) {
  StreamMixOrder o;
  const MixOptions& mix = options.mix;
  if (mix.names.empty()) return o;
  if (mix.law != MixLaw::kSample) {
    return InvalidArgument(std::string("stream=True mixes by weight (law \"sample\"), an endless stream of each "
                                       "source; law \"") + MixLawName(mix.law) + "\" needs the sources' sizes, "
                           "which a stream does not count: index the shards, or give weights");
  }
  o.sources_ = static_cast<uint32_t>(mix.names.size());
  o.names_ = mix.names;
  o.block_ = static_cast<uint64_t>(std::max(1, options.batch_size));
  o.unit_ = mix.one_source_per_batch ? o.block_ : 1;
  o.shuffle_ = options.shuffle && !mix.one_source_per_batch;
  const uint64_t rank = static_cast<uint64_t>(options.rank);
  o.phase_key_ = MixSeed(options.seed ^ kPhaseKey, rank);
  o.block_key_ = MixSeed(options.seed ^ kBlockKey, rank, kPassKey);
  if (mix.weights.size() != mix.names.size()) {
    return InvalidArgument("a mixture of " + std::to_string(mix.names.size()) + " sources has " +
                           std::to_string(mix.weights.size()) + " weights");
  }
  STOKER_ASSIGN_OR_RETURN(std::vector<uint64_t> integers, SampleLawWeights(mix));
  o.segments_.push_back(Segment{0, std::vector<uint64_t>(o.sources_, 0), MixAllocation(integers, o.phase_key_)});
  o.first_weights_ = mix.weights;
  return o;
}

Status StreamMixOrder::Rebase(uint64_t from, const std::vector<double>& weights) {
  if (weights.size() != sources_) {
    return InvalidArgument("a mixture of " + std::to_string(sources_) + " sources has " +
                           std::to_string(weights.size()) + " weights");
  }
  MixOptions mix;
  mix.names = names_;
  mix.weights = weights;
  STOKER_ASSIGN_OR_RETURN(std::vector<uint64_t> integers, SampleLawWeights(mix));
  if (from % block_ != 0 || from < segments_.back().from) {
    return InvalidArgument("a mixture's weights change at a batch's first position after the last change");
  }
  Segment next{from, {}, MixAllocation(integers, MixSeed(phase_key_, from))};
  for (uint32_t s = 0; s < sources_; ++s) next.base.push_back(DrawsBefore(s, from));
  if (segments_.back().from == from) {  // replaced before any position drew by it
    segments_.pop_back();
    if (!changes_.empty() && changes_.back().from == from) changes_.pop_back();
  }
  segments_.push_back(std::move(next));
  changes_.push_back({from, weights});
  return Status::Ok();
}

const StreamMixOrder::Segment& StreamMixOrder::SegmentAt(uint64_t p) const {
  auto after = std::upper_bound(segments_.begin(), segments_.end(), p,
                                [](uint64_t x, const Segment& seg) { return x < seg.from; });
  return *(after - 1);  // the first segment starts at 0
}

uint32_t StreamMixOrder::SourceAt(uint64_t p) const {
  if (sources_ <= 1) return 0;
  // A batch's draws of a source in random slots, as MixOrder's step 3 (an endless stream: every block whole).
  if (shuffle_) p = PermutedInBlock(p, block_, UINT64_MAX, block_key_);
  const Segment& seg = SegmentAt(p);
  return seg.alloc.Locate((p - seg.from) / unit_).source;
}

uint64_t StreamMixOrder::DrawsBefore(uint32_t source, uint64_t p) const {
  if (sources_ <= 1) return p;
  // p falls on a block's edge: a block's permutation moves no draw out of it.
  const Segment& seg = SegmentAt(p);
  return seg.base[source] + seg.alloc.Count(source, (p - seg.from) / unit_) * unit_;
}

const char* MixLawName(MixLaw law) {
  switch (law) {
    case MixLaw::kProportion:
      return "proportion";
    case MixLaw::kStopAtFirst:
      return "stop_at_first";
    case MixLaw::kCounts:
      return "counts";
    case MixLaw::kSample:
      break;
  }
  return "sample";
}

MixAllocation::MixAllocation(const std::vector<uint64_t>& weights, uint64_t seed) {
  std::vector<uint64_t> prefix(weights.size() + 1, 0);
  for (size_t s = 0; s < weights.size(); ++s) prefix[s + 1] = prefix[s] + weights[s];
  nodes_.reserve(2 * weights.size());
  Build(0, static_cast<uint32_t>(weights.size()), prefix, seed);
}

int32_t MixAllocation::Build(uint32_t lo, uint32_t hi, const std::vector<uint64_t>& prefix, uint64_t seed) {
  const int32_t id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back(Node{lo, lo + (hi - lo) / 2, hi});
  if (hi - lo == 1) return id;
  Node n = nodes_[static_cast<size_t>(id)];
  n.a = prefix[n.mid] - prefix[lo];
  n.d = prefix[hi] - prefix[lo];
  n.t = n.d > 0 ? MixSeed(seed, lo, hi) % n.d : 0;
  n.left = Build(lo, n.mid, prefix, seed);
  n.right = Build(n.mid, hi, prefix, seed);
  nodes_[static_cast<size_t>(id)] = n;
  return id;
}

uint64_t MixAllocation::Left(const Node& n, uint64_t x) {
  if (n.d == 0) return 0;  // a subtree of weight 0 is never reached
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n.a + n.t) / n.d);
}

MixAllocation::Draw MixAllocation::Locate(uint64_t g) const {
  const Node* n = &nodes_[0];
  while (n->left >= 0) {
    const uint64_t c = Left(*n, g);
    if (Left(*n, g + 1) > c) {
      g = c;
      n = &nodes_[static_cast<size_t>(n->left)];
    } else {
      g -= c;
      n = &nodes_[static_cast<size_t>(n->right)];
    }
  }
  return Draw{n->lo, g};
}

uint64_t MixAllocation::Count(size_t source, uint64_t x) const {
  const Node* n = &nodes_[0];
  while (n->left >= 0) {
    const uint64_t c = Left(*n, x);
    if (source < n->mid) {
      x = c;
      n = &nodes_[static_cast<size_t>(n->left)];
    } else {
      x -= c;
      n = &nodes_[static_cast<size_t>(n->right)];
    }
  }
  return x;
}

std::vector<uint64_t> MixSourceSamples(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& o) {
  std::vector<uint64_t> out;
  size_t at = 0;
  for (uint32_t shards : o.mix.shards) {
    uint64_t n = 0;
    for (size_t i = at; i < at + shards && i < samples_per_shard.size(); ++i) n += samples_per_shard[i];
    out.push_back(n);
    at += shards;
  }
  return out;
}

Result<std::shared_ptr<const MixOrder>> MixOrder::Make(const std::vector<uint32_t>& samples_per_shard,
                                                       const LoaderOptions& options, uint64_t epoch,
                                                       const MixSegment* segment) {
  const MixOptions& mix = options.mix;
  const size_t n = mix.names.size();
  if (n == 0) return InvalidArgument("a mixture needs at least one source");
  if (mix.shards.size() != n) {
    return InvalidArgument("a mixture of " + std::to_string(n) + " sources has shard counts for " +
                           std::to_string(mix.shards.size()));
  }
  uint64_t shards = 0;
  for (uint32_t s : mix.shards) shards += s;
  if (shards != samples_per_shard.size()) {
    return InvalidArgument("the mixture's sources expand to " + std::to_string(shards) + " shards, the loader has " +
                           std::to_string(samples_per_shard.size()));
  }
  auto order = std::make_shared<MixOrder>();
  MixOrder& o = *order;
  o.source_samples_ = MixSourceSamples(samples_per_shard, options);
  for (size_t s = 0; s < n; ++s) {
    if (o.source_samples_[s] == 0) {
      return InvalidArgument("source '" + mix.names[s] + "' of the mixture has no samples");
    }
  }
  STOKER_ASSIGN_OR_RETURN(std::vector<uint64_t> weights, IntegerWeights(options, o.source_samples_));
  o.law_ = mix.law;
  o.epoch_ = epoch;
  o.seed_ = options.seed;
  o.shuffle_ = options.shuffle;
  o.block_ = static_cast<uint64_t>(std::max(1, options.batch_size));
  o.unit_ = mix.one_source_per_batch ? o.block_ : 1;
  o.alloc_ = MixAllocation(weights, MixSeed(options.seed, kPhaseKey));
  uint64_t total = 0;
  for (uint64_t c : o.source_samples_) total += c;
  switch (mix.law) {
    case MixLaw::kSample:
      if (mix.samples_per_epoch < 0) return InvalidArgument("samples_per_epoch of a mixture must be >= 0");
      o.length_ = mix.samples_per_epoch > 0 ? static_cast<uint64_t>(mix.samples_per_epoch) : total;
      break;
    case MixLaw::kProportion:
      o.length_ = total;
      break;
    case MixLaw::kCounts:
      o.length_ = 0;
      for (uint64_t c : weights) o.length_ += c;
      break;
    case MixLaw::kStopAtFirst: {
      // The longest prefix in which no source draws more than it holds (each
      // source's count grows with the prefix: a binary search).
      auto fits = [&](uint64_t m) {
        for (size_t s = 0; s < n; ++s) {
          if (o.CountAt(s, m) > o.source_samples_[s]) return false;
        }
        return true;
      };
      uint64_t lo = 0, hi = total;  // fits(lo); the answer is in [lo, hi]
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid)) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      o.length_ = lo;
      break;
    }
  }
  if (o.length_ == 0) return InvalidArgument("the mixture's epoch holds no samples");
  if (mix.one_source_per_batch && (mix.law != MixLaw::kSample || o.length_ % o.unit_ != 0)) {
    return InvalidArgument("one source per batch needs law sample and samples_per_epoch a multiple of batch_size (" +
                           std::to_string(o.unit_) + "), not " + std::to_string(o.length_));
  }
  o.base_.assign(n, 0);
  o.block_key_ = MixSeed(options.seed ^ kBlockKey, epoch);
  if (segment) {
    if (mix.law != MixLaw::kSample) {
      return InvalidArgument("a mixture's weights change mid-epoch only under law sample");
    }
    if (segment->base_draws.size() != n || segment->length == 0) return InvalidArgument("a bad mixture segment");
    o.length_ = segment->length;
    o.base_ = segment->base_draws;
    o.block_key_ = MixSeed(options.seed ^ kBlockKey, epoch, kPassKey);  // not the epoch's own blocks
  } else if (mix.law == MixLaw::kSample) {
    if (epoch < mix.base_epoch) {
      return InvalidArgument("epoch " + std::to_string(epoch) + " is before the mixture's weights changed (epoch " +
                             std::to_string(mix.base_epoch) + ")");
    }
    if (!mix.base_draws.empty()) {
      if (mix.base_draws.size() != n) return InvalidArgument("the mixture's base_draws are not one per source");
      o.base_ = mix.base_draws;
    }
    o.g0_ = (epoch - mix.base_epoch) * o.length_;
  } else if (mix.law == MixLaw::kProportion || mix.law == MixLaw::kCounts) {
    o.g0_ = epoch * o.length_;  // each epoch one period of the allocation: every source its exact count
  }
  o.shard_first_.assign(n + 1, 0);
  for (size_t s = 0; s < n; ++s) o.shard_first_[s + 1] = o.shard_first_[s] + mix.shards[s];
  o.first_.assign(samples_per_shard.size() + 1, 0);
  for (size_t i = 0; i < samples_per_shard.size(); ++i) o.first_[i + 1] = o.first_[i] + samples_per_shard[i];
  o.counts_.resize(n);
  for (size_t s = 0; s < n; ++s) {
    o.counts_[s].assign(samples_per_shard.begin() + o.shard_first_[s],
                        samples_per_shard.begin() + o.shard_first_[s + 1]);
  }
  if ((!mix.shuffle_blocks.empty() && mix.shuffle_blocks.size() != n) ||
      (!mix.shuffle_mixes.empty() && mix.shuffle_mixes.size() != n)) {
    return InvalidArgument("a mixture of " + std::to_string(n) + " sources has order units for " +
                           std::to_string(std::max(mix.shuffle_blocks.size(), mix.shuffle_mixes.size())));
  }
  o.pass_options_.assign(n, options);
  o.passes_.resize(n);
  // The first pass of each source is made now: a bad option fails here, not in a reader thread.
  for (size_t s = 0; s < n; ++s) {
    LoaderOptions& pass = o.pass_options_[s];
    if (!mix.shuffle_blocks.empty()) pass.shuffle_block = mix.shuffle_blocks[s];
    if (!mix.shuffle_mixes.empty()) pass.shuffle_mix = mix.shuffle_mixes[s];
    pass.mix = MixOptions{};
    STOKER_RETURN_IF_ERROR(
        EpochOrder::Make(o.counts_[s], pass, 0).status().WithContext("source '" + mix.names[s] + "'"));
  }
  return std::shared_ptr<const MixOrder>(std::move(order));
}

MixAllocation::Draw MixOrder::DrawAt(uint64_t p) const {
  const uint64_t q = shuffle_ ? PermutedInBlock(p, block_, length_, block_key_) : p;
  MixAllocation::Draw d = LocateAt(g0_ + q);
  d.k += base_[d.source];
  return d;
}

std::vector<uint64_t> MixOrder::DrawnBefore() const {
  std::vector<uint64_t> out(num_sources(), 0);
  for (size_t s = 0; s < out.size(); ++s) {
    out[s] = law_ == MixLaw::kStopAtFirst ? epoch_ * source_samples_[s] : base_[s] + CountAt(s, g0_);
  }
  return out;
}

std::vector<uint64_t> MixOrder::DrawnAfter() const {
  std::vector<uint64_t> out(num_sources(), 0);
  for (size_t s = 0; s < out.size(); ++s) {
    out[s] = law_ == MixLaw::kStopAtFirst ? (epoch_ + 1) * source_samples_[s]
                                          : base_[s] + CountAt(s, g0_ + length_);
  }
  return out;
}

std::vector<uint64_t> MixOrder::CountIn(uint64_t begin, uint64_t end) const {
  std::vector<uint64_t> out(num_sources(), 0);
  end = std::min(end, length_);
  if (begin >= end) return out;
  // Whole blocks (their positions permuted among themselves) count by the
  // allocation; the part blocks at the ends position by position.
  uint64_t lo = begin, hi = end;
  if (shuffle_) {
    lo = std::min(end, (begin + block_ - 1) / block_ * block_);
    hi = std::max(lo, end / block_ * block_);
    for (uint64_t p = begin; p < lo; ++p) ++out[DrawAt(p).source];
    for (uint64_t p = hi; p < end; ++p) ++out[DrawAt(p).source];
  }
  for (size_t s = 0; s < out.size(); ++s) out[s] += CountAt(s, g0_ + hi) - CountAt(s, g0_ + lo);
  return out;
}

MixAllocation::Draw MixOrder::LocateAt(uint64_t g) const {
  if (unit_ == 1) return alloc_.Locate(g);
  // One source per batch: the allocation hands out whole units of batch_size
  // consecutive positions, each a run of its source's draws.
  MixAllocation::Draw d = alloc_.Locate(g / unit_);
  d.k = d.k * unit_ + g % unit_;
  return d;
}

uint64_t MixOrder::CountAt(size_t source, uint64_t g) const {
  if (unit_ == 1) return alloc_.Count(source, g);
  const uint64_t whole = alloc_.Count(source, g / unit_) * unit_;
  return whole + (g % unit_ != 0 && alloc_.Locate(g / unit_).source == source ? g % unit_ : 0);
}

uint32_t MixOrder::SourceOfShard(uint32_t shard) const {
  return stoker::SourceOfShard(shard_first_, shard);  // shard_first_'s last entry (all shards) is never found
}

SampleRef MixOrder::At(uint64_t p) const {
  const MixAllocation::Draw d = DrawAt(p);
  const uint64_t n = source_samples_[d.source];
  const uint64_t pass = law_ == MixLaw::kStopAtFirst ? epoch_ : d.k / n;
  const uint64_t j = law_ == MixLaw::kStopAtFirst ? d.k : d.k % n;
  const SampleRef local = PassOrder(d.source, pass)->At(j);
  const uint32_t shard = shard_first_[d.source] + local.shard;
  return SampleRef{shard, local.sample, first_[shard] + local.sample};
}

std::shared_ptr<const EpochOrder> MixOrder::PassOrder(uint32_t source, uint64_t pass) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (CachedPass& c : passes_[source]) {
      if (c.pass == pass && c.order) {
        c.used = ++tick_;
        return c.order;
      }
    }
  }
  // A pass is the order a loader of this source alone makes at epoch `pass`
  // with a seed of its own; Make checked the options, so it cannot fail.
  LoaderOptions o = pass_options_[source];
  o.seed = MixSeed(seed_ ^ kPassKey, source);
  std::shared_ptr<const EpochOrder> order = EpochOrder::Make(counts_[source], o, pass).value();
  std::lock_guard<std::mutex> lock(mu_);
  CachedPass* oldest = &passes_[source][0];
  for (CachedPass& c : passes_[source]) {
    if (c.pass == pass && c.order) return c.order;  // another thread built it meanwhile
    if (c.used < oldest->used) oldest = &c;
  }
  *oldest = CachedPass{pass, ++tick_, order};
  return order;
}

Result<std::shared_ptr<const EpochOrder>> MakeEpochOrder(const std::vector<uint32_t>& samples_per_shard,
                                                         const LoaderOptions& options, uint64_t epoch) {
  if (options.mix.names.empty()) return EpochOrder::Make(samples_per_shard, options, epoch);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const MixOrder> mix, MixOrder::Make(samples_per_shard, options, epoch));
  return EpochOrder::Computed(samples_per_shard, std::move(mix));
}

std::string DescribeMix(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                        const std::vector<std::string>& within) {
  Result<std::shared_ptr<const MixOrder>> mix = MixOrder::Make(samples_per_shard, options, 0);
  if (!mix.ok()) return "a mixture: " + mix.status().ToString();
  const std::vector<uint64_t>& n = (*mix)->source_samples();
  std::string out = "mixture of " + std::to_string(n.size()) + " sources, law " + MixLawName(options.mix.law) + ", " +
                    std::to_string((*mix)->size()) + " samples an epoch (";
  // Law counts: every epoch holds exactly these draws of each source (one period of the allocation).
  const Result<std::vector<uint64_t>> counts =
      options.mix.law == MixLaw::kCounts ? EpochCounts(options.mix, n) : Result<std::vector<uint64_t>>(n);
  if (!counts.ok()) return "a mixture: " + counts.status().ToString();
  for (size_t s = 0; s < n.size(); ++s) {
    char w[64];
    if (options.mix.law == MixLaw::kProportion) {
      std::snprintf(w, sizeof w, "%zu", static_cast<size_t>(n[s]));
    } else if (options.mix.law == MixLaw::kCounts) {
      const int64_t choose = options.mix.choose.empty() ? -1 : options.mix.choose[s];
      const uint64_t drawn = (*counts)[s];
      if (choose >= 0) {
        std::snprintf(w, sizeof w, "choose %zu", static_cast<size_t>(drawn));
      } else {
        std::snprintf(w, sizeof w, "repeat %.4g = %zu", options.mix.weights[s], static_cast<size_t>(drawn));
      }
    } else {
      std::snprintf(w, sizeof w, "%.4g", options.mix.weights[s]);
    }
    out += (s ? ", " : "") + options.mix.names[s] + " " + w + " of " + std::to_string(n[s]) + " samples";
  }
  out += std::string("); ") +
         (options.mix.one_source_per_batch ? "one source per batch, "
          : options.shuffle                ? "each batch's draws in random slots, "
                                           : "") +
         "each source's passes: ";
  if (std::all_of(within.begin(), within.end(), [&](const std::string& w) { return w == within[0]; })) {
    return out + (within.empty() ? "" : within[0]);
  }
  for (size_t s = 0; s < within.size() && s < options.mix.names.size(); ++s) {
    out += (s ? "; " : "") + options.mix.names[s] + ": " + within[s];
  }
  return out;
}

}  // namespace stoker
