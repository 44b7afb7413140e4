// pipeline/epoch_order.h — the global sample order of one epoch, computed
// position by position rather than stored.
//
// Position p of the epoch (p < size(), the dataset's sample count) is the
// sample At(p): a pure function of (samples per shard, shuffle options, seed,
// epoch), independent of rank, world size and batch size, so every rank
// cuts the same order (planner.h) and elastic resume re-cuts it. The orders
// (planner.h describes each):
//  * no shuffle: position p is dataset sample p (shards concatenated);
//  * single samples (shuffle_block 1, shuffle_buffer 0, shuffle_window 0):
//    dataset sample IndexShuffle(p), a keyed bijection of [0, N);
//  * blocks (shuffle_block B > 1, shuffle_buffer 0, shuffle_window 0): the
//    blocks of every shard permuted by an IndexShuffle of the block indices;
//  * windowed (shuffle_window K > 0, shuffle_buffer 0): the shards permuted
//    by an IndexShuffle of the shard ids, the permuted list cut into windows
//    of K shards one after another, and inside each window its samples
//    (B = 1) or its blocks (cut as above) permuted by an IndexShuffle keyed
//    by (seed, epoch, window);
//  * either block order with the mix (shuffle_mix M > 0): blocks cut at
//    phase 0, then the positions of each run of M consecutive blocks of the
//    order above permuted among themselves by an IndexShuffle keyed by
//    (seed, epoch, run) (and the window, windowed);
//  * streamed through a buffer (shuffle_buffer > 0): WebDataset's scheme,
//    without its ramp (stream mode's buffer has it: shuffle_buffer.h): the
//    order is listed whole before the epoch, so no batch waits on the buffer.
// A sample's shard comes from the per-shard prefix sums by binary search;
// the mix adds an IndexShuffle of the run's positions and a second search
// among its M blocks, no memory.
// Memory: O(shards) for the first two and for windowed single samples, which
// is what a rank keeps however large the dataset (400M samples in 41,000
// shards: 330 KB, 820 KB windowed); windowed blocks add the block tables of
// the last kWindowsKept windows asked for (built on demand in O(window's
// blocks)); the whole-dataset block order keeps one entry per block (20 bytes
// per B samples: its phases are drawn shard after shard from one stream, so
// no block's place is known without cutting every shard) and the buffered
// stream one per sample (16 bytes), both built in O(blocks or samples) per
// epoch.
// Thread-safety: immutable after Make, but for the windowed block order's
// cache of window tables, which a mutex guards; At is safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pipeline/index_shuffle.h"
#include "stoker/loader.h"

namespace stoker {

struct SampleRef {
  uint32_t shard;
  uint32_t sample;   // index within the shard
  uint64_t global;   // index within the dataset (shards concatenated)
};

// An order computed by another unit (a mixture of sources, mix_order.h):
// positions [0, size()) of the epoch, each a sample of the dataset.
class OrderFunction {
 public:
  virtual ~OrderFunction() = default;
  virtual uint64_t size() const = 0;
  virtual SampleRef At(uint64_t p) const = 0;
};

class EpochOrder {
 public:
  // options: shuffle, shuffle_block (-1 unresolved means 1), shuffle_window
  // (-1 unresolved means 0), shuffle_buffer, seed.
  static Result<std::shared_ptr<const EpochOrder>> Make(const std::vector<uint32_t>& samples_per_shard,
                                                        const LoaderOptions& options, uint64_t epoch);

  // An order given as a list of the dataset's samples (a caller's own).
  static std::shared_ptr<const EpochOrder> Listed(const std::vector<uint32_t>& samples_per_shard,
                                                  std::vector<SampleRef> order);

  // An order that `f` computes over the dataset of these shards; its length
  // is f's (a mixture's epoch need not be the dataset's size).
  static std::shared_ptr<const EpochOrder> Computed(const std::vector<uint32_t>& samples_per_shard,
                                                    std::shared_ptr<const OrderFunction> f);

  uint64_t size() const { return computed_ ? computed_->size() : first_.back(); }
  // The function of a Computed order (null for the others).
  const OrderFunction* computed() const { return computed_.get(); }
  size_t num_shards() const { return first_.size() - 1; }

  // The sample at position p < size().
  SampleRef At(uint64_t p) const;

  // Dataset sample g < size() as a reference (its shard and index in it).
  SampleRef RefOf(uint64_t g) const;

  // Windows of the windowed order (1 for every other order: the whole
  // dataset): the shards and positions each one covers, so a reader can tell
  // which shards' indexes the positions ahead of it need.
  size_t num_windows() const;
  // The window holding position p < size().
  size_t WindowOf(uint64_t p) const;
  // Positions [begin, end) of window w's samples in the order.
  std::pair<uint64_t, uint64_t> WindowPositions(size_t w) const;
  // The shards of window w (all of them for an order that is not windowed).
  std::vector<uint32_t> WindowShards(size_t w) const;

  // Window tables the windowed block order keeps at once: a rank reads one
  // window and, at its edge, the next; skip-and-refill draws from the start
  // of its part, one more; small windows leave room for a read-ahead that
  // spans several. Past that a table is rebuilt (correct, slower), which
  // costs little exactly where windows are small enough to be many.
  static constexpr size_t kWindowsKept = 8;

  EpochOrder() = default;
  EpochOrder(const EpochOrder&) = delete;
  EpochOrder& operator=(const EpochOrder&) = delete;

 private:
  enum class Kind { kShardOrder, kPermuted, kBlocks, kListed, kWindowed, kComputed };
  struct Block {
    uint32_t shard, begin, end;  // samples [begin, end) of the shard
  };
  // One window's blocks in plan order (windowed order, shuffle_block > 1).
  struct WindowTable {
    std::vector<Block> blocks;
    std::vector<uint64_t> start;  // position of each block's first sample, from the window's start
  };

  // The windowed order's shard permutation and prefix sums; key: the epoch's.
  void MakeWindowed(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options, uint64_t key);
  // Windowed order: the first permuted shard of window w and one past its last.
  size_t WindowBegin(size_t w) const { return w * window_; }
  size_t WindowEnd(size_t w) const;
  IndexShuffle WindowShuffle(size_t w, uint64_t n) const;
  std::shared_ptr<const WindowTable> TableOf(size_t w) const;
  std::shared_ptr<const WindowTable> BuildTable(size_t w) const;

  Kind kind_ = Kind::kShardOrder;
  std::vector<uint64_t> first_;  // first_[s]: dataset index of shard s's sample 0; first_.back() = N
  IndexShuffle shuffle_;         // kPermuted
  std::vector<Block> blocks_;    // kBlocks: in plan order
  std::vector<uint64_t> block_start_;  // kBlocks: plan position of each block's first sample
  std::vector<SampleRef> listed_;      // kListed: the whole order
  std::shared_ptr<const OrderFunction> computed_;  // kComputed
  // kBlocks and kWindowed with blocks: shuffle_mix (0: none), and the key of
  // each run's permutation (with the window's index, windowed).
  uint32_t mix_ = 0;
  uint64_t mix_key_ = 0;

  // kWindowed. The permuted shards one after another: shard_perm_[i] is the
  // i-th, and perm_first_[i] the position of its sample 0 (perm_first_.back()
  // = N); window w is permuted shards [w * window_, (w + 1) * window_).
  size_t window_ = 0;                   // K shards a window
  uint32_t block_ = 1;                  // shuffle_block: 1, or the blocks' B
  uint64_t window_key_ = 0;             // keys each window's IndexShuffle
  uint64_t phase_key_ = 0;              // keys each shard's block phase
  std::vector<uint32_t> shard_perm_;
  std::vector<uint64_t> perm_first_;

  // kWindowed with blocks: the tables of the windows asked for last, the
  // oldest replaced first. Built outside the lock (two threads may build the
  // same table; both are equal and one is kept).
  struct CachedTable {
    size_t window = SIZE_MAX;
    uint64_t used = 0;  // tick of the last use
    std::shared_ptr<const WindowTable> table;
  };
  mutable std::mutex cache_mu_;
  mutable std::array<CachedTable, kWindowsKept> cache_;  // guarded by cache_mu_
  mutable uint64_t tick_ = 0;                            // guarded by cache_mu_
};

}  // namespace stoker
