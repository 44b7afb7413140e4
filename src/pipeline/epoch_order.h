// pipeline/epoch_order.h — the global sample order of one epoch, computed
// position by position rather than stored.
//
// Position p of the epoch (p < size(), the dataset's sample count) is the
// sample At(p): a pure function of (samples per shard, shuffle options, seed,
// epoch), independent of rank, world size and batch size, so every rank
// cuts the same order (planner.h) and elastic resume re-cuts it. The orders
// (planner.h describes each):
//  * no shuffle: position p is dataset sample p (shards concatenated);
//  * single samples (shuffle_block 1, shuffle_buffer 0): dataset sample
//    IndexShuffle(p), a keyed bijection of [0, N);
//  * blocks (shuffle_block B > 1, shuffle_buffer 0): the blocks of every
//    shard permuted by an IndexShuffle of the block indices;
//  * streamed through a buffer (shuffle_buffer > 0): WebDataset's scheme.
// A sample's shard comes from the per-shard prefix sums by binary search.
// Memory: O(shards) for the first two, which is what a rank keeps however
// large the dataset (400M samples in 41,000 shards: 330 KB); the block order
// keeps one entry per block (20 bytes per B samples) and the buffered stream
// one per sample (16 bytes), both built in O(blocks or samples) per epoch.
// Thread-safety: immutable after Make; At is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/index_shuffle.h"
#include "stoker/loader.h"

namespace stoker {

struct SampleRef {
  uint32_t shard;
  uint32_t sample;   // index within the shard
  uint64_t global;   // index within the dataset (shards concatenated)
};

class EpochOrder {
 public:
  // options: shuffle, shuffle_block (-1 unresolved means 1), shuffle_buffer, seed.
  static Result<std::shared_ptr<const EpochOrder>> Make(const std::vector<uint32_t>& samples_per_shard,
                                                        const LoaderOptions& options, uint64_t epoch);

  // An order given as a list of the dataset's samples (a caller's own).
  static std::shared_ptr<const EpochOrder> Listed(const std::vector<uint32_t>& samples_per_shard,
                                                  std::vector<SampleRef> order);

  uint64_t size() const { return first_.back(); }
  size_t num_shards() const { return first_.size() - 1; }

  // The sample at position p < size().
  SampleRef At(uint64_t p) const;

  // Dataset sample g < size() as a reference (its shard and index in it).
  SampleRef RefOf(uint64_t g) const;

 private:
  enum class Kind { kShardOrder, kPermuted, kBlocks, kListed };
  struct Block {
    uint32_t shard, begin, end;  // samples [begin, end) of the shard
  };

  Kind kind_ = Kind::kShardOrder;
  std::vector<uint64_t> first_;  // first_[s]: dataset index of shard s's sample 0; first_.back() = N
  IndexShuffle shuffle_;         // kPermuted
  std::vector<Block> blocks_;    // kBlocks: in plan order
  std::vector<uint64_t> block_start_;  // kBlocks: plan position of each block's first sample
  std::vector<SampleRef> listed_;      // kListed: the whole order
};

// A 64-bit mix of its arguments (splitmix64); seeds of shuffles and of
// per-sample augmentation derive from it.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace stoker
