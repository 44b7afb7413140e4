// tests/cpp/pipeline/block_shuffle_test.cc — the block shuffle (planner.h,
// shuffle_block > 1): exactly once per epoch on every rank layout, a pure
// function of (seed, epoch), blocks contiguous within their shard with edges
// that move between epochs, and few coalesced reads per batch (the point of it).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "pipeline/elastic.h"
#include "pipeline/memory_budget.h"
#include "pipeline/planner.h"
#include "pipeline/read_runs.h"
#include "pipeline/shard_indexes.h"

namespace stoker {
namespace {

// A plan's samples in delivery order (plans keep no list: At computes each).
std::vector<SampleRef> Refs(const EpochPlan& p) {
  std::vector<SampleRef> v;
  for (int64_t i = 0; i < p.info.rank_samples; ++i) v.push_back(p.At(i));
  return v;
}

LoaderOptions Opts(int block, int bs = 8, int world = 1, int rank = 0) {
  LoaderOptions o;
  o.shuffle = true;
  o.shuffle_block = block;
  o.batch_size = bs;
  o.world_size = world;
  o.rank = rank;
  o.seed = 11;
  return o;
}

std::vector<uint64_t> Globals(const EpochPlan& p) {
  std::vector<uint64_t> g;
  for (const SampleRef& r : Refs(p)) g.push_back(r.global);
  return g;
}

// The epoch's whole order: one rank, one sample per batch.
std::vector<SampleRef> GlobalOrder(const std::vector<uint32_t>& counts, int block, uint64_t epoch, uint64_t seed = 11) {
  LoaderOptions o = Opts(block, 1);
  o.seed = seed;
  o.drop_last = false;
  auto p = PlanEpoch(counts, o, epoch);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return Refs(*p);
}

// Maximal pieces of the order that are consecutive samples of one shard.
std::vector<std::pair<size_t, size_t>> Pieces(const std::vector<SampleRef>& order) {
  std::vector<std::pair<size_t, size_t>> out;  // [begin, end) positions
  size_t begin = 0;
  for (size_t i = 1; i <= order.size(); ++i) {
    if (i == order.size() || order[i].shard != order[i - 1].shard || order[i].sample != order[i - 1].sample + 1) {
      out.emplace_back(begin, i);
      begin = i;
    }
  }
  return out;
}

// Shard indexes whose samples lie back to back (as tar members of one
// sample each do, up to headers), on a remote path.
std::vector<ShardIndex> Contiguous(const std::vector<uint32_t>& counts) {
  std::vector<ShardIndex> ix(counts.size());
  for (size_t s = 0; s < counts.size(); ++s) {
    ix[s].shard_path = "http://host/" + std::to_string(s) + ".tar";
    for (uint64_t i = 0; i < counts[s]; ++i) ix[s].samples.push_back({"k", {}, i * 1000, i * 1000 + 900});
  }
  return ix;
}

const std::vector<std::vector<uint32_t>> kDatasets = {
    {100, 37, 64, 250, 5, 1, 90},  // uneven, with shards shorter than a block
    {768, 768, 768, 768},          // V-like
    {3},
    {17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17},
};

TEST(BlockShuffleTest, EverySampleExactlyOncePerEpochOnEveryRankLayout) {
  for (const auto& counts : kDatasets) {
    uint64_t total = 0;
    for (uint32_t c : counts) total += c;
    for (int block : {2, 3, 8, 16, 64}) {
      for (int world : {1, 2, 3, 5}) {
        for (int bs : {1, 4, 64}) {
          for (PartitionPolicy policy : {PartitionPolicy::kDropRemainder, PartitionPolicy::kPadRepeat}) {
            for (bool drop_last : {true, false}) {
              std::multiset<uint64_t> seen;
              int64_t batches = -1;
              bool refused = false;
              for (int rank = 0; rank < world; ++rank) {
                LoaderOptions o = Opts(block, bs, world, rank);
                o.partition = policy;
                o.drop_last = drop_last;
                auto p = PlanEpoch(counts, o, 2);
                if (!p.ok()) {  // fewer samples than ranks or than a batch: refused alike on every rank
                  refused = true;
                  continue;
                }
                ASSERT_FALSE(refused);
                if (batches >= 0) {
                  ASSERT_EQ(p->info.batches, batches) << "equal batches per rank";
                }
                batches = p->info.batches;
                for (uint64_t g : Globals(*p)) seen.insert(g);
              }
              if (refused) continue;
              const std::set<uint64_t> distinct(seen.begin(), seen.end());
              for (uint64_t g : distinct) ASSERT_LT(g, total);
              const uint64_t per_rank = policy == PartitionPolicy::kPadRepeat ? (total + world - 1) / world
                                                                              : total / world;
              const uint64_t n = std::min<uint64_t>(per_rank, batches * static_cast<uint64_t>(bs));
              ASSERT_EQ(seen.size(), static_cast<uint64_t>(world) * n);
              // Rank r delivers order positions [r * per_rank, r * per_rank + n), wrapping
              // past the end under pad: distinct samples are exactly the distinct positions.
              std::set<uint64_t> positions;
              for (int r = 0; r < world; ++r)
                for (uint64_t i = 0; i < n; ++i) positions.insert((r * per_rank + i) % total);
              ASSERT_EQ(distinct.size(), positions.size()) << "block " << block << " world " << world;
              if (policy == PartitionPolicy::kDropRemainder) {
                ASSERT_EQ(distinct.size(), seen.size()) << "no sample twice";
              }
            }
          }
        }
      }
    }
  }
}

TEST(BlockShuffleTest, APureFunctionOfSeedAndEpoch) {
  const auto& counts = kDatasets[0];
  auto a = GlobalOrder(counts, 8, 3), b = GlobalOrder(counts, 8, 3);
  auto c = GlobalOrder(counts, 8, 4), d = GlobalOrder(counts, 8, 3, 12);
  auto globals = [](const std::vector<SampleRef>& v) {
    std::vector<uint64_t> g;
    for (const SampleRef& r : v) g.push_back(r.global);
    return g;
  };
  EXPECT_EQ(globals(a), globals(b));
  EXPECT_NE(globals(a), globals(c)) << "another epoch, another order";
  EXPECT_NE(globals(a), globals(d)) << "another seed, another order";
  // Ranks and batch size cut the same global order (what elastic resume relies on).
  LoaderOptions o = Opts(8, 5, 3, 1);
  auto p = PlanEpoch(counts, o, 3);
  ASSERT_TRUE(p.ok());
  const size_t per_rank = a.size() / 3;
  for (int64_t i = 0; i < p->info.rank_samples; ++i) ASSERT_EQ(p->At(i).global, a[per_rank + i].global);
}

TEST(BlockShuffleTest, BlocksAreContiguousInTheirShardAndTheirEdgesMove) {
  const std::vector<uint32_t> counts = {100, 37, 64, 250, 5, 1, 90};
  for (int block : {2, 8, 16}) {
    std::set<std::vector<size_t>> edges_per_epoch;
    for (uint64_t epoch = 0; epoch < 4; ++epoch) {
      auto order = GlobalOrder(counts, block, epoch);
      std::vector<size_t> shard0_edges;  // where shard 0's pieces start, by sample index
      for (auto [begin, end] : Pieces(order)) {
        const SampleRef head = order[begin];
        const size_t len = end - begin;
        // A piece is one block or more of one shard (neighbouring blocks may land
        // next to each other): at least a block, or the whole of a shorter shard.
        ASSERT_GE(len, std::min<size_t>(block, counts[head.shard])) << "shard " << head.shard;
        if (head.shard == 0) shard0_edges.push_back(head.sample);
      }
      std::sort(shard0_edges.begin(), shard0_edges.end());
      edges_per_epoch.insert(shard0_edges);
    }
    EXPECT_GT(edges_per_epoch.size(), 1u) << "block edges move between epochs, block " << block;
  }
  // A shard of 2B..3B-1 samples is two blocks, never one whole-shard block:
  // it reads as one piece only when its two blocks land next to each other
  // in order (about 1 in 8 here; with a phase drawn over all of [0, B) it was
  // one block 31 times in 32).
  int split = 0, cases = 0;
  for (uint64_t epoch = 0; epoch < 16; ++epoch) {
    auto small = GlobalOrder({64, 64, 70, 95}, 32, epoch);
    std::map<uint32_t, int> pieces;
    for (auto [begin, end] : Pieces(small)) pieces[small[begin].shard] += 1;
    for (auto [shard, count] : pieces) {
      split += count >= 2;
      ++cases;
    }
  }
  EXPECT_GE(split * 10, cases * 6) << split << " of " << cases << " shard-epochs split";
  // Blocks are not whole shards: shard 3 (250 samples) is cut into many pieces.
  auto order = GlobalOrder(counts, 16, 0);
  int pieces3 = 0;
  for (auto [begin, end] : Pieces(order)) pieces3 += order[begin].shard == 3;
  EXPECT_GE(pieces3, 5);
}

TEST(BlockShuffleTest, EachBatchIsAtMostCeilBatchOverBlockPlusOneReads) {
  const std::vector<uint32_t> counts = {768, 768, 768, 768, 100, 64, 300};  // shards no shorter than a block
  const auto ix = ShardIndexCache::Holding(Contiguous(counts));
  for (int block : {4, 16, 64}) {
    for (int bs : {16, 64, 100}) {
      for (int world : {1, 3}) {
        for (int rank = 0; rank < world; ++rank) {
          LoaderOptions o = Opts(block, bs, world, rank);
          auto p = PlanEpoch(counts, o, 1);
          ASSERT_TRUE(p.ok());
          const int64_t bound = (bs + block - 1) / block + 1;
          int64_t reads_total = 0;
          for (int64_t b = 0; b < p->info.batches; ++b) {
            int64_t reads = 0;
            for (int slot = 0; slot < bs;) {
              slot += RunLength(*p, *ix, b * bs + slot, bs - slot, kRemoteCoalesceBytes);
              ++reads;
            }
            ASSERT_LE(reads, bound) << "block " << block << " batch " << bs << " #" << b;
            reads_total += reads;
          }
          // and far fewer than one read per sample
          EXPECT_LT(reads_total * block, 2 * p->info.batches * bs + block * p->info.batches);
        }
      }
    }
  }
  // Single samples (shuffle_block 1): nearly one read per sample, for contrast.
  auto p = PlanEpoch(counts, Opts(1, 64), 1);
  ASSERT_TRUE(p.ok());
  int64_t reads = 0;
  for (int64_t b = 0; b < p->info.batches; ++b)
    for (int slot = 0; slot < 64; ++reads) slot += RunLength(*p, *ix, b * 64 + slot, 64 - slot, kRemoteCoalesceBytes);
  EXPECT_GT(reads, p->info.batches * 60);
}

TEST(BlockShuffleTest, SingleSampleBlocksAreTheGlobalPermutationAndABufferKeepsItsMeaning) {
  const auto& counts = kDatasets[0];
  for (int buffer : {0, 7}) {
    LoaderOptions a = Opts(1), b = Opts(-1), c = Opts(16);
    a.shuffle_buffer = b.shuffle_buffer = c.shuffle_buffer = buffer;
    auto pa = PlanEpoch(counts, a, 5), pb = PlanEpoch(counts, b, 5), pc = PlanEpoch(counts, c, 5);
    ASSERT_TRUE(pa.ok() && pb.ok() && pc.ok());
    EXPECT_EQ(Globals(*pa), Globals(*pb)) << "an unresolved auto is single samples";
    if (buffer > 0) {
      EXPECT_EQ(Globals(*pa), Globals(*pc)) << "shuffle_buffer > 0 ignores shuffle_block";
    }
  }
  LoaderOptions unshuffled = Opts(16);
  unshuffled.shuffle = false;
  auto p = PlanEpoch(counts, unshuffled, 0);
  ASSERT_TRUE(p.ok());
  for (int64_t i = 0; i < p->info.rank_samples; ++i) ASSERT_EQ(p->At(i).global, static_cast<uint64_t>(i));
  for (int bad : {0, -2}) EXPECT_FALSE(PlanEpoch(counts, Opts(bad), 0).ok()) << bad;
}

TEST(BlockShuffleTest, AutoIsSingleSamplesLocallyAndBlocksRemotely) {
  EXPECT_EQ(AutoShuffleBlock(Opts(-1), false), 1);
  EXPECT_EQ(AutoShuffleBlock(Opts(-1), true), kRemoteShuffleBlock);
  EXPECT_EQ(AutoShuffleBlock(Opts(7), false), 7);
  EXPECT_EQ(AutoShuffleBlock(Opts(1), true), 1);
}

TEST(BlockShuffleTest, AutoIoDepthIsLowerUnderAMemoryBudgetAndFourLocally) {
  std::vector<ShardIndex> ix = Contiguous({768, 768});
  for (ShardIndex& i : ix) {
    std::vector<SampleEntry> samples;
    for (SampleView e : i.samples) samples.push_back({std::string(e.key), {}, e.begin, e.begin + (64 << 10)});  // 64 KiB samples
    i.samples = SampleTable(samples);
  }
  BatchLayout layout;
  layout.buffer_bytes = 64 * 224 * 224 * 3;
  LoaderOptions o = Opts(16, 64);
  o.decode_threads = 2;
  EXPECT_EQ(AutoIoDepth(o, layout, SummariesOf(ix), false), kLocalIoDepth);
  EXPECT_EQ(AutoIoDepth(o, layout, SummariesOf(ix), true), 40);
  o.io_depth = 40;
  const uint64_t need40 = EstimateMemory(o, layout, SummariesOf(ix)).total();
  o.io_depth = 10;
  const uint64_t need10 = EstimateMemory(o, layout, SummariesOf(ix)).total();
  ASSERT_LT(need10, need40);
  o.io_depth = -1;
  o.memory_budget = need10 + 1;  // 40 and 20 do not fit, 10 does
  EXPECT_EQ(AutoIoDepth(o, layout, SummariesOf(ix), true), 10);
  o.memory_budget = 1;  // nothing fits: the floor, and Create's check names the need
  EXPECT_EQ(AutoIoDepth(o, layout, SummariesOf(ix), true), kLocalIoDepth);
  o.io_depth = 7;  // a number given is kept
  EXPECT_EQ(AutoIoDepth(o, layout, SummariesOf(ix), true), 7);
}

TEST(BlockShuffleTest, ElasticResumeReCutsTheSameBlockOrder) {
  const std::vector<uint32_t> counts = {120, 90, 64, 200};
  const int bs = 8, block = 16;
  for (auto [w, w2] : {std::pair{4, 2}, {2, 3}, {3, 3}}) {
    const int64_t n = 3;
    std::multiset<uint64_t> want, got;
    for (int r = 0; r < w; ++r) {
      auto p = PlanEpoch(counts, Opts(block, bs, w, r), 6);
      ASSERT_TRUE(p.ok());
      for (int64_t i = n * bs; i < p->info.rank_samples; ++i) want.insert(p->At(i).global);
    }
    int64_t batches = -1;
    for (int r = 0; r < w2; ++r) {
      auto p = PlanRemaining(counts, Opts(block, bs, w2, r), 6, {{w, n}});
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      if (batches >= 0) {
        EXPECT_EQ(p->info.batches, batches);
      }
      batches = p->info.batches;
      for (uint64_t g : Globals(*p)) got.insert(g);
    }
    EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size()) << "each once";
    for (uint64_t g : got) EXPECT_EQ(want.count(g), 1u) << "only samples still to come";
    EXPECT_GE(got.size() + static_cast<size_t>(w2) * bs, want.size()) << "all but the cut to equal batches";
  }
}

}  // namespace
}  // namespace stoker
