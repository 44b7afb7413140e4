// pipeline/planner.h — the order of one epoch for one rank.
//
// A pure function of (sample counts per shard, options, epoch): no thread
// timing, no I/O. Same inputs, same plan, on any machine and any thread count.
//
//  * no shuffle: shard order, then member order;
//  * shuffle, shuffle_buffer == 0, shuffle_block 1: one global permutation of
//    every sample (random access by index), a keyed bijection of [0, N)
//    evaluated per position (index_shuffle.h), never a list of N samples;
//  * shuffle, shuffle_buffer == 0, shuffle_block B > 1 (the block shuffle, the
//    auto choice for remote shards): each shard is cut into blocks of B
//    consecutive samples at a phase drawn per shard and epoch (a first or
//    last piece shorter than B joins its neighbour, so blocks hold B..2B-1
//    samples), and all blocks of all shards are permuted together. A block
//    stays contiguous in plan order, so the batch that holds it reads it as
//    one ranged GET (read_runs.h): a batch of b samples is at most
//    ceil(b / B) + 1 reads instead of b. The moving phase keeps blocks from
//    being the same groups every epoch; samples closer than B in a shard
//    still often share a batch (README, "Shuffle quality", has the measures).
//    Mosaic Streaming's shuffles trade the same way for whole-shard
//    downloads: py1b shuffles the shards, cuts the concatenation into
//    fixed blocks of shuffle_block_size samples and permutes samples within
//    each block; py1br draws the block sizes at random so block edges move
//    between epochs; py1e spreads each shard's samples over a window by a
//    random offset and sorts, a softer edge. Their blocks are ~2^18 samples,
//    as each must be a few whole shards held on local disk. Here a block is
//    a byte range read once, so it is tiny (tens of samples), and the moving
//    edge is py1br's idea done as a random phase per shard;
//  * shuffle, shuffle_buffer == 0, shuffle_window K > 0 (the windowed
//    shuffle): the shards are permuted (an IndexShuffle of the shard ids),
//    the permuted list is cut into windows of K consecutive shards, and each
//    window's units (single samples for shuffle_block 1; for B > 1 the blocks
//    cut as above, at a phase per shard and epoch) are permuted by an
//    IndexShuffle keyed by (seed, epoch, window). Windows follow one another,
//    so a window's shards are read to their end before the next window's
//    begin, a batch draws from K shards (2K where it crosses a window's
//    edge), and a rank's contiguous part (below) meets only the shards of
//    its run of windows: the shard indexes a reader needs are those of one
//    or two windows at a time, which a loader can load lazily and drop. The
//    order costs O(shards) (the permuted list and its position prefix); for
//    blocks, a window's block table is built when a position of it is asked
//    and the last few are kept. This is Mosaic Streaming's py1b with the
//    block made of whole shards instead of a sample count (py1b shuffles
//    shards, cuts their concatenation into fixed blocks and permutes samples
//    within each; a window never splits a shard; K = 1 is their py1s), and
//    webdataset's shard shuffle with a buffer of K whole shards instead of a
//    sliding one of samples: a sample moves only inside its window, exactly
//    once, and the order is a random-access function of the position, so
//    ranks cut it and resume re-cuts it as every other order. shuffle_window
//    0 (and -1, auto, unresolved) is the whole dataset: the two orders
//    above, unchanged;
//  * the mix (shuffle_mix M > 0, with either block order above): blocks are
//    cut at multiples of B (no phase), and the samples of each run of M
//    consecutive blocks of the order are permuted among themselves (an
//    IndexShuffle per run, keyed by seed, epoch and run), so a batch draws
//    from M blocks taken from anywhere in the dataset (the block order put
//    them side by side) instead of one or two blocks in member order. It is
//    Parquet's auto: a row is read out of its decoded row group, so what a
//    reader needs at once is the run's row groups, not a byte range per
//    block, and B = the files' row group size makes a block a row group.
//    Without it a file of one row group came out in file order every epoch
//    (issue 44). A run holds M * B rows; a dataset larger than that still
//    has batches of at most M runs of its member order (a label-sorted file
//    gives about M labels a batch), which DescribeParquetMix says. The
//    phase is dropped because the mix spreads a block over its run anyway
//    and cuts on row group edges decode each row group once an epoch;
//    tf.data's and Mosaic's bounded shuffles trade the same way (a window
//    of whole units held at once, its elements permuted inside it);
//  * shuffle, shuffle_buffer > 0: shards permuted, then samples streamed
//    through a buffer of that many samples (WebDataset's scheme, simulated
//    here so it is deterministic), so reads stay mostly sequential. This one
//    is a list of the epoch's samples (16 bytes each).
// None of them depends on rank, world size or batch size before the cut
// below, so elastic resume (elastic.h) re-cuts the same global order.
// The epoch order (epoch_order.h) is then cut into world_size contiguous parts (ShareOfRank:
// equal under the drop or pad policy, reported in PlanInfo; within one sample
// of each other under the exact policy), and this rank's part into batches,
// as many on every rank. A plan holds its part as spans of positions of
// the shared order, so a rank's plan costs O(shards), not O(samples).
// Thread-safety: free functions on values; a plan is immutable once made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/epoch_order.h"
#include "stoker/loader.h"

namespace stoker {

// One rank's part of an order, as pieces of it: positions [first, first +
// count) of the epoch's global order (EpochOrder), each piece inside it.
struct OrderSpan {
  uint64_t first = 0;
  uint64_t count = 0;
};

struct EpochPlan {
  PlanInfo info;
  // Shard runs: this rank's samples in delivery order are the spans of the
  // epoch's global order, one after another (one or two spans for a fresh
  // epoch, the second where the pad policy wraps; a few per rank of each
  // saved world size after elastic resume). No list of samples is kept:
  // At(i) finds its span and asks the order.
  std::shared_ptr<const EpochOrder> order;
  std::vector<OrderSpan> spans;
  std::vector<uint64_t> span_start;  // rank position of each span's first sample
  // Token runs keep no list: sample i of this rank is global sample
  // first + (i / micro) * global_batch + rank_offset + i % micro.
  bool strided = false;
  uint64_t first = 0, global_batch = 0, rank_offset = 0, micro = 1;

  // The sample at rank position i < info.rank_samples.
  SampleRef At(int64_t i) const;
  // This rank's position i as a position of the global order.
  uint64_t OrderPosition(int64_t i) const;
};

// One rank's part of an order of `total` samples: positions [begin, begin +
// count) of it, taken modulo total (the pad policy's repeats), delivered in
// `batches` batches of options.batch_size, the same number on every rank.
//  * drop: floor(total / world) each; drop_last cuts each part to whole batches.
//  * pad: ceil(total / world) each; the last rank's part wraps to the start.
//  * exact: floor(total / world), plus one for the first total % world ranks,
//    so every position is in exactly one part; batches is what the largest
//    part needs, so a smaller part ends in a short or empty (0-row) batch.
//    drop_last would drop samples, so it must be false.
// PlanEpoch cuts the epoch with it and elastic resume (elastic.h) the rest of
// one; `left` words messages ("in the dataset", "left in this epoch").
struct RankShare {
  uint64_t begin = 0;
  uint64_t count = 0;
  int64_t batches = 0;
};
Result<RankShare> ShareOfRank(uint64_t total, const LoaderOptions& options, int world, int rank,
                              const std::string& left);

// Positions [begin, begin + count) of a list of spans holding `total`
// positions, taken modulo total, as spans (adjacent ones merged).
std::vector<OrderSpan> SliceSpans(const std::vector<OrderSpan>& spans, uint64_t total, uint64_t begin,
                                  uint64_t count);

// This rank's plan over `order` (an epoch's whole order, or what is left of
// it as spans) cut by ShareOfRank; `left` words messages.
Result<EpochPlan> PlanShare(std::shared_ptr<const EpochOrder> order, const std::vector<OrderSpan>& spans,
                            const LoaderOptions& options, const std::string& left);

Result<EpochPlan> PlanEpoch(const std::vector<uint32_t>& samples_per_shard, const LoaderOptions& options,
                            uint64_t epoch);

// Megatron's pretraining sampler over `total` samples from `consumed`: each
// global batch of batch_size * world_size consecutive samples gives rank r its
// [r * batch_size, (r + 1) * batch_size) part; a partial last global batch is
// dropped (drop_last, as megatron trains), or under the exact partition
// delivered as the sampler with drop_last=False does: rank r's part of it is
// its slice, short or empty. O(1): no list is built.
Result<EpochPlan> PlanTokenRun(int64_t total, int64_t consumed, const LoaderOptions& options);

// The block for shuffle_block -1 (auto) over local files is 1: a pread costs
// no round trip, so single samples cost nothing. Over remote shards, blocks
// of this many samples: a V batch of 64 is then about 5 coalesced GETs.
inline constexpr int kRemoteShuffleBlock = 16;
// options.shuffle_block, or the auto choice for shards that are `remote`.
int AutoShuffleBlock(const LoaderOptions& options, bool remote);

// The fewest shards the auto window permutes together: below it a batch
// would mix too few shards (webdataset's advice is several per worker).
inline constexpr int kMinShuffleWindow = 8;
// options.shuffle_window, or the auto choice (loader.h) for `shards` whose
// index tables take `table_bytes` together against a bound of `index_bytes`.
int AutoShuffleWindow(const LoaderOptions& options, uint64_t table_bytes, uint64_t index_bytes, size_t shards);

// Row-group blocks whose rows the auto mix permutes together over Parquet
// files (shuffle_mix -1): the decoded row groups kept grow by as many
// (memory_budget.h's ParquetGroupsKept), lowered to fit a memory budget.
// Measured (bench/shuffle_quality.py, 4,096 rows sorted by 16 labels, batch
// 64): a file of one row group or of 8 gets 15.76 distinct labels a batch,
// a uniform permutation's 15.75; of 32 row groups 7.58 (0.48x: a batch
// draws from 8 random row groups, about 7 labels); without the mix 1.2-1.5
// (0.08x). More blocks a run would hold more decoded row groups for a mix
// that only a file sorted by label needs; its fix is to write it shuffled.
inline constexpr int kParquetMixBlocks = 8;
// options.shuffle_mix, or the auto choice (-1): kParquetMixBlocks for Parquet
// files shuffled in blocks (shuffle_block > 1, shuffle_buffer 0), else 0.
int AutoShuffleMix(const LoaderOptions& options, bool parquet);

// A mixture's sources' order units (MixOptions::shuffle_blocks and
// shuffle_mixes), each as a loader of that source alone resolves them from
// `user`'s shuffle_block and shuffle_mix (-1: auto): a Parquet source
// (parquet_blocks[s] > 0, its ParquetShuffleBlock) its row groups, mixed by
// at most `parquet_mix` blocks (the loader's, lowered to fit memory_budget);
// a remote one (remote[s]) kRemoteShuffleBlock; a local one single samples.
void SetSourceOrders(const LoaderOptions& user, const std::vector<int>& parquet_blocks, const std::vector<bool>& remote,
                     int parquet_mix, MixOptions* mix);

// Over Parquet files of `rows` rows each, what the order leaves to the
// files' layout, in words appended to settings["order"] (the one place a
// user is told): where a batch does not draw from a permutation of the
// whole dataset (more blocks than one run holds, a window, no mix), how far
// the rows mix and the fix. Empty where they mix uniformly or no shuffle
// is asked for.
std::string DescribeParquetMix(const LoaderOptions& options, const std::vector<uint32_t>& rows);

// The order in words, for settings and the log: "samples permuted within
// windows of 64 shards", "shard order", ...
std::string DescribeOrder(const LoaderOptions& options);

}  // namespace stoker
