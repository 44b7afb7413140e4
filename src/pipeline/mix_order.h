// pipeline/mix_order.h — the epoch order of a mixture of sources: several
// datasets in one loader, each drawn by its weight (LoaderOptions::mix).
//
// The sources' shards are concatenated (source after source), and the
// mixture is one more order over that concatenated dataset, so everything
// after the order (ranks' cuts, elastic resume, reads, decode, skips) is the
// indexed engine's, unchanged. Position p of epoch e is a pure function of
// (seed, epoch, weights, the sources' sample counts), independent of rank,
// world size and thread count, computed without any per-sample list:
//
//  1. The allocation. Every source has one endless stream of draws; the
//     mixture interleaves them into one stream by a binary tree over the
//     sources: a node with weights a (left) and d (both sides) sends its
//     n-th position left when floor(((n + 1) a + t) / d) > floor((n a + t) / d)
//     (a Bresenham line, t a phase drawn from the seed per node), so among
//     any n consecutive positions each side gets within one of n a / d, and
//     a source's share of the first n positions is within depth
//     (ceil(log2 sources)) of n w_s. A position's source and its draw index
//     k within that source's stream are found by walking the tree: O(log
//     sources), and the draws of a source up to any position likewise, both
//     in exact integer arithmetic.
//  2. The epoch's part of the stream (after a weight change, the stream of
//     the new weights from the change on, each source's draws counted on
//     from where they were: MixOptions::base_draws, MixSegment). Law "sample": epoch e is stream
//     positions [e M, (e + 1) M) (M = samples_per_epoch), so each source's
//     passes run on across epochs. Law "proportion": the weights are the
//     sources' sample counts and M their total, so the tree gives source s
//     exactly N_s of each epoch's positions: epoch e is pass e of every
//     source, each sample once (partition="exact" then covers every sample
//     of every source exactly once). Law "stop_at_first": epoch e is the
//     stream's first M positions with pass e of every source, M the longest
//     prefix in which no source draws more than it holds (webdataset's
//     RandomMix with longest=False, made deterministic). Law "counts"
//     (Mosaic Streaming's repeat/choose): the weights are each source's
//     draws an epoch (EpochCounts) and M their sum, so epoch e is stream
//     positions [e M, (e + 1) M) with exactly those draws of each source,
//     its passes running on across epochs as under "sample".
//  3. Mixed within batches: with shuffle, positions are permuted within
//     consecutive blocks of batch_size positions (an IndexShuffle keyed by
//     seed, epoch and block), so a batch's draws of a source are a run of
//     consecutive draws of its stream in random slots; the batch is read by
//     shard and sample, not by slot (read_runs.h ScatteredRuns), so a remote
//     source's blocks still cost a GET each, not one per sample. A batch's
//     share of a source is thus stratified: within about depth + 1 samples
//     of w_s * batch_size, never a binomial spread.
//     With one source per batch (MixOptions::one_source_per_batch) the
//     allocation hands out units of batch_size consecutive positions
//     instead of single ones: a batch is a run of one source's draws, as
//     multi-task training and aspect-ratio buckets want, wherever ranks'
//     batches fall on units (an epoch of a multiple of batch_size x
//     world_size samples; an elastic resume may cut the rest elsewhere).
//  4. A source's draw k is sample k mod N_s of its pass floor(k / N_s), and a
//     pass is the order a loader of that source alone would make (planner.h:
//     single samples, blocks, windows, Parquet's mix, as the options say)
//     with seed MixSeed(seed, s) at epoch = pass: every pass a fresh
//     bijective shuffle, each sample exactly once per pass. Each source
//     keeps its own unit (MixOptions::shuffle_blocks): a Parquet source's
//     row groups beside a tar source's single samples.
// Memory: the tree (2 S nodes) and, per source, the orders of the last
// kPassesKept passes asked (O(shards) each for single samples, O(blocks)
// for the block order), built on demand.
// Thread-safety: immutable after Make but for the pass cache, which a mutex
// guards; At is safe from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/epoch_order.h"
#include "stoker/loader.h"

namespace stoker {

// The interleaving of step 1 above, over integer weights.
class MixAllocation {
 public:
  MixAllocation() = default;
  // weights: one per source, not all 0; seed keys the nodes' phases.
  MixAllocation(const std::vector<uint64_t>& weights, uint64_t seed);

  struct Draw {
    uint32_t source;
    uint64_t k;  // the draw's index in its source's stream
  };
  // Stream position g's source and draw.
  Draw Locate(uint64_t g) const;
  // Draws of `source` among stream positions [0, n).
  uint64_t Count(size_t source, uint64_t n) const;

 private:
  struct Node {
    uint32_t lo, mid, hi;  // sources [lo, hi); left child [lo, mid)
    int32_t left = -1, right = -1;
    uint64_t a = 0, d = 0, t = 0;  // left weight, node weight, phase in [0, d)
  };
  int32_t Build(uint32_t lo, uint32_t hi, const std::vector<uint64_t>& prefix, uint64_t seed);
  static uint64_t Left(const Node& n, uint64_t x);  // positions of [0, x) sent left
  std::vector<Node> nodes_;  // nodes_[0]: the root
};

// The rest of an epoch whose weights changed in its middle (law sample, a
// restore with other weights): `length` positions drawn by the new weights,
// each source's stream going on from base_draws, a fresh pass of its own
// after every pass the interrupted order reaches.
struct MixSegment {
  uint64_t length = 0;
  std::vector<uint64_t> base_draws;
};

class MixOrder : public OrderFunction {
 public:
  // samples_per_shard: the concatenated shards; options.mix.shards: how many
  // belong to each source, in order. segment: the rest of an epoch whose
  // weights changed (law sample only).
  static Result<std::shared_ptr<const MixOrder>> Make(const std::vector<uint32_t>& samples_per_shard,
                                                      const LoaderOptions& options, uint64_t epoch,
                                                      const MixSegment* segment = nullptr);

  uint64_t size() const override { return length_; }
  SampleRef At(uint64_t p) const override;

  size_t num_sources() const { return source_samples_.size(); }
  // The draw at position p of the epoch.
  MixAllocation::Draw DrawAt(uint64_t p) const;
  // Draws of each source before this epoch (all ranks together), counted
  // from its first pass: pass = drawn / samples, as the state reports.
  std::vector<uint64_t> DrawnBefore() const;
  // Draws of each source once this epoch (or segment) is over.
  std::vector<uint64_t> DrawnAfter() const;
  const std::vector<uint64_t>& source_samples() const { return source_samples_; }
  // Each source's positions among the epoch's positions [begin, end):
  // O(sources log sources) for whole blocks and O(batch_size) for the part
  // blocks at either end, never a walk of the range.
  std::vector<uint64_t> CountIn(uint64_t begin, uint64_t end) const;
  // The source of dataset shard `shard`.
  uint32_t SourceOfShard(uint32_t shard) const;

  static constexpr size_t kPassesKept = 4;

 private:
  std::shared_ptr<const EpochOrder> PassOrder(uint32_t source, uint64_t pass) const;
  // The allocation over stream positions, in units of unit_ positions.
  MixAllocation::Draw LocateAt(uint64_t g) const;
  uint64_t CountAt(size_t source, uint64_t g) const;

  std::vector<LoaderOptions> pass_options_;  // per source: the options its pass orders are made with (mix cleared)
  MixLaw law_ = MixLaw::kSample;
  uint64_t epoch_ = 0, length_ = 0, block_ = 1, seed_ = 0;
  uint64_t g0_ = 0;              // the stream position of the epoch's position 0
  uint64_t unit_ = 1;            // positions a source is handed at once: 1, or batch_size (one source per batch)
  uint64_t block_key_ = 0;       // keys the permutations within blocks
  std::vector<uint64_t> base_;   // each source's draws before stream position 0
  bool shuffle_ = false;
  MixAllocation alloc_;
  std::vector<uint64_t> source_samples_;      // N_s
  std::vector<uint32_t> shard_first_;         // first dataset shard of each source; back(): all shards
  std::vector<uint64_t> first_;               // dataset index of each shard's sample 0
  std::vector<std::vector<uint32_t>> counts_;  // per source: its shards' sample counts

  struct CachedPass {
    uint64_t pass = UINT64_MAX, used = 0;
    std::shared_ptr<const EpochOrder> order;
  };
  mutable std::mutex mu_;
  mutable std::vector<std::array<CachedPass, kPassesKept>> passes_;  // guarded by mu_
  mutable uint64_t tick_ = 0;                                        // guarded by mu_
};

// A stream mixture's order (stream mode, stream_source.h): position p of a
// rank's endless stream draws the next sample of source SourceAt(p), by the
// weights (law sample only: a stream counts no source), allocated as
// MixOrder's step 1 over the rank's positions, and with shuffle the
// positions of each batch_size block permuted among themselves (step 3); or
// one source a batch (MixOptions::one_source_per_batch). Each source's
// draws are its own stream's samples in order, so a source's share of a
// batch is within a few samples of its weight x batch_size, as indexed.
// Weights changed at a restore take effect from the next batch: the order
// is then segments, each from a batch's first position on with its own
// weights, every source's draws going on from where the segment before left
// them (Rebase). One dataset (no mixture): source 0 everywhere.
// O(log sources) a position, no per-sample state.
// Thread-safety: immutable after Make and Rebase.
class StreamMixOrder {
 public:
  static Result<StreamMixOrder> Make(const LoaderOptions& options);
  uint32_t SourceAt(uint64_t p) const;
  // Draws of `source` among positions [0, p), p a multiple of batch_size.
  uint64_t DrawsBefore(uint32_t source, uint64_t p) const;
  uint32_t num_sources() const { return std::max<uint32_t>(1, sources_); }

  // From position `from` (a multiple of batch_size, at or after the last
  // segment's start) on, `weights` (as MixOptions::weights) allocate the
  // positions, each source's draws going on from DrawsBefore(s, from).
  Status Rebase(uint64_t from, const std::vector<double>& weights);
  // For a state: the first segment's weights, and each later segment's (from, weights).
  struct Change {
    uint64_t from = 0;
    std::vector<double> weights;
  };
  const std::vector<double>& first_weights() const { return first_weights_; }
  const std::vector<Change>& changes() const { return changes_; }

 private:
  struct Segment {
    uint64_t from = 0;              // its first position
    std::vector<uint64_t> base;     // each source's draws before it
    MixAllocation alloc;
  };
  const Segment& SegmentAt(uint64_t p) const;

  uint32_t sources_ = 0;
  std::vector<std::string> names_;
  std::vector<Segment> segments_;  // by `from`, the first from position 0
  std::vector<double> first_weights_;
  std::vector<Change> changes_;
  uint64_t block_ = 1, unit_ = 1, block_key_ = 0, phase_key_ = 0;
  bool shuffle_ = false;
};

// Law sample's weights as integers: each source's share of 2^40, at least 1
// where its weight is > 0; an error for a negative or non-finite weight, or all 0.
Result<std::vector<uint64_t>> SampleLawWeights(const MixOptions& mix);

// Law counts: each source's draws an epoch (choose, or repeat x its samples).
Result<std::vector<uint64_t>> EpochCounts(const MixOptions& mix, const std::vector<uint64_t>& samples);

// The sources' sample counts (options.mix.shards cutting samples_per_shard).
std::vector<uint64_t> MixSourceSamples(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options);

// The epoch's order: the mixture's where options.mix names sources, else
// EpochOrder::Make's.
Result<std::shared_ptr<const EpochOrder>> MakeEpochOrder(const std::vector<uint32_t>& samples_per_shard,
                                                         const LoaderOptions& options, uint64_t epoch);

const char* MixLawName(MixLaw law);

// The mixture in words for settings["order"]: its law, epoch length and
// each source's weight and size; within[s] is how source s's passes are
// ordered (DescribeOrder), said once where all are alike.
std::string DescribeMix(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                        const std::vector<std::string>& within);

}  // namespace stoker
