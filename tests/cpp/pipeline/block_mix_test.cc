// tests/cpp/pipeline/block_mix_test.cc — the mix (planner.h, shuffle_mix M >
// 0): blocks cut at multiples of the block, the samples of each run of M
// consecutive blocks of the order permuted among themselves. Exactly once per
// epoch on every rank layout and after elastic resume, a pure function of
// (seed, epoch), each run the samples of M whole blocks, a one-block shard
// shuffled (issue 44: a Parquet file of one row group came out in file
// order), and the distinct labels of a batch over a label-sorted shard near a
// uniform permutation's, computed here in closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "pipeline/elastic.h"
#include "pipeline/memory_budget.h"
#include "pipeline/planner.h"

namespace stoker {
namespace {

LoaderOptions Opts(int block, int mix, int bs = 8, int world = 1, int rank = 0) {
  LoaderOptions o;
  o.shuffle = true;
  o.shuffle_block = block;
  o.shuffle_mix = mix;
  o.batch_size = bs;
  o.world_size = world;
  o.rank = rank;
  o.seed = 5;
  return o;
}

std::vector<uint64_t> Globals(const EpochPlan& p) {
  std::vector<uint64_t> g;
  for (int64_t i = 0; i < p.info.rank_samples; ++i) g.push_back(p.At(i).global);
  return g;
}

// The epoch's whole order (one rank, batches of one, nothing dropped).
std::vector<uint64_t> Order(const std::vector<uint32_t>& counts, LoaderOptions o, uint64_t epoch) {
  o.batch_size = 1;
  o.world_size = 1;
  o.rank = 0;
  o.drop_last = false;
  auto p = PlanEpoch(counts, o, epoch);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? Globals(*p) : std::vector<uint64_t>{};
}

const std::vector<std::vector<uint32_t>> kDatasets = {
    {300},                         // one Parquet file of one row group
    {100, 37, 64, 250, 5, 1, 90},  // uneven, with shards shorter than a block
    {400, 400, 400},
    {3},
};

TEST(BlockMixTest, EverySampleExactlyOnceWithEqualBatchesOnEveryRankLayout) {
  for (const auto& counts : kDatasets) {
    const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
    for (int block : {2, 7, 64, 300}) {
      for (int mix : {1, 3, 8}) {
        for (int window : {0, 2}) {
          for (int world : {1, 3}) {
            // Exact: the ranks' parts, in rank order, are the order itself.
            std::vector<uint64_t> joined;
            int64_t batches = -1;
            for (int rank = 0; rank < world; ++rank) {
              LoaderOptions o = Opts(block, mix, 4, world, rank);
              o.shuffle_window = window;
              o.partition = PartitionPolicy::kExact;
              o.drop_last = false;
              auto p = PlanEpoch(counts, o, 2);
              ASSERT_TRUE(p.ok()) << p.status().ToString();
              if (batches >= 0) {
                ASSERT_EQ(p->info.batches, batches) << "equal batches per rank";
              }
              batches = p->info.batches;
              for (uint64_t g : Globals(*p)) joined.push_back(g);
            }
            LoaderOptions whole = Opts(block, mix);
            whole.shuffle_window = window;
            ASSERT_EQ(joined, Order(counts, whole, 2)) << "block " << block << " mix " << mix;
            std::vector<uint64_t> sorted = joined;
            std::sort(sorted.begin(), sorted.end());
            for (uint64_t i = 0; i < total; ++i) ASSERT_EQ(sorted[i], i) << "every sample exactly once";
          }
        }
      }
    }
  }
}

TEST(BlockMixTest, APureFunctionOfSeedAndEpoch) {
  const std::vector<uint32_t> counts = {400, 400, 400};
  const LoaderOptions o = Opts(100, 4);
  EXPECT_EQ(Order(counts, o, 3), Order(counts, o, 3));
  EXPECT_NE(Order(counts, o, 3), Order(counts, o, 4));
  LoaderOptions other = o;
  other.seed = 6;
  EXPECT_NE(Order(counts, o, 3), Order(counts, other, 3));
}

TEST(BlockMixTest, AOneBlockShardIsShuffledAndEachEpochDiffers) {
  // One file of one row group: the block is the whole file. Before the mix
  // its rows came in file order every epoch.
  const std::vector<uint32_t> counts = {300};
  std::vector<uint64_t> identity(300);
  std::iota(identity.begin(), identity.end(), 0);
  const auto e0 = Order(counts, Opts(300, 1), 0), e1 = Order(counts, Opts(300, 1), 1);
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(Order(counts, Opts(300, 0), 0), identity) << "no mix: the block in member order";
}

TEST(BlockMixTest, EachRunHoldsTheSamplesOfMWholeBlocksCutOnMultiplesOfTheBlock) {
  // Shards of 10 row groups of 50 rows and a last of 20: blocks [50k, 50k+50),
  // the last [400, 470). A run's positions hold M of these, whole.
  const std::vector<uint32_t> counts = {470, 470, 120};
  const int block = 50, mix = 3;
  const auto order = Order(counts, Opts(block, mix), 1);
  std::vector<uint64_t> first = {0, 470, 940, 1060};
  auto block_of = [&](uint64_t g) {  // (shard, block index) as the cuts at phase 0 make them
    const size_t s = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), g) - first.begin() - 1);
    const uint64_t n = first[s + 1] - first[s], i = g - first[s];
    const uint64_t blocks = std::max<uint64_t>(1, n / block);
    return std::make_pair(s, std::min(i / block, blocks - 1));
  };
  size_t pos = 0, runs = 0;
  while (pos < order.size()) {
    // The run starting here: its blocks are those its first M blocks' worth of samples come from.
    std::set<std::pair<size_t, uint64_t>> blocks;
    size_t size = 0;
    size_t end = pos;
    while (end < order.size() && blocks.size() <= static_cast<size_t>(mix)) {
      auto b = block_of(order[end]);
      if (!blocks.count(b) && blocks.size() == static_cast<size_t>(mix)) break;
      blocks.insert(b);
      ++end;
    }
    for (const auto& [s, k] : blocks) {
      const uint64_t n = first[s + 1] - first[s], last = std::max<uint64_t>(1, n / block) - 1;
      size += k == last ? n - k * block : block;
    }
    ASSERT_EQ(end - pos, size) << "run " << runs << ": the samples of its blocks, each block whole";
    std::set<uint64_t> in(order.begin() + static_cast<std::ptrdiff_t>(pos),
                          order.begin() + static_cast<std::ptrdiff_t>(end));
    ASSERT_EQ(in.size(), size);
    pos = end;
    ++runs;
  }
  EXPECT_EQ(runs, (9 + 9 + 2 + mix - 1) / mix);  // 9, 9 and 2 blocks
}

TEST(BlockMixTest, ElasticResumeMeetsTheRestOfTheMixedOrder) {
  const std::vector<uint32_t> counts = {470, 470, 120};
  LoaderOptions base = Opts(50, 4, 8, 3);
  base.partition = PartitionPolicy::kExact;
  base.drop_last = false;
  // Three ranks delivered 5 batches each; two ranks take the rest.
  std::multiset<uint64_t> seen;
  for (int r = 0; r < 3; ++r) {
    LoaderOptions o = base;
    o.rank = r;
    auto p = PlanEpoch(counts, o, 4);
    ASSERT_TRUE(p.ok());
    const auto g = Globals(*p);
    seen.insert(g.begin(), g.begin() + 5 * 8);
  }
  for (int r = 0; r < 2; ++r) {
    LoaderOptions o = base;
    o.world_size = 2;
    o.rank = r;
    auto rest = PlanRemaining(counts, o, 4, {{3, 5}});
    ASSERT_TRUE(rest.ok()) << rest.status().ToString();
    for (uint64_t g : Globals(*rest)) seen.insert(g);
  }
  EXPECT_EQ(seen.size(), 1060u);
  EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 1060u) << "every sample exactly once";
}

// E[distinct labels] among b draws without replacement from N items in C
// equal classes: C * (1 - P(a class is missed)), P = C(N - N/C, b) / C(N, b).
double UniformDistinct(int n, int classes, int b) {
  double missed = 1;
  const int per = n / classes;
  for (int i = 0; i < b; ++i) missed *= static_cast<double>(n - per - i) / (n - i);
  return classes * (1 - missed);
}

double MeanDistinct(const std::vector<uint64_t>& order, int per_class, int b) {
  double sum = 0;
  int batches = 0;
  for (size_t i = 0; i + b <= order.size(); i += b, ++batches) {
    std::set<uint64_t> labels;
    for (int k = 0; k < b; ++k) labels.insert(order[i + k] / per_class);
    sum += labels.size();
  }
  return sum / batches;
}

TEST(BlockMixTest, ALabelSortedShardMixesNearlyAsAUniformPermutation) {
  // 400 rows sorted by label, 8 labels of 50; batches of 32.
  const double uniform = UniformDistinct(400, 8, 32);
  // One row group (one block): a permutation of the whole file.
  const auto one = Order({400}, Opts(400, kParquetMixBlocks), 0);
  EXPECT_GE(MeanDistinct(one, 50, 32), 0.9 * uniform);
  // Eight row groups of 50 rows: one run of kParquetMixBlocks holds them all.
  const auto eight = Order({400}, Opts(50, kParquetMixBlocks), 0);
  EXPECT_GE(MeanDistinct(eight, 50, 32), 0.9 * uniform);
  // Without the mix, a batch is two or three pieces of the sorted file.
  const auto blocks = Order({400}, Opts(50, 0), 0);
  EXPECT_LE(MeanDistinct(blocks, 50, 32), 3.0);
}

TEST(BlockMixTest, TheAutoMixIsParquetsAndItsRowGroupsAreKept) {
  LoaderOptions o = Opts(100, -1);
  EXPECT_EQ(AutoShuffleMix(o, /*parquet=*/true), kParquetMixBlocks);
  EXPECT_EQ(AutoShuffleMix(o, /*parquet=*/false), 0);
  o.shuffle_buffer = 100;
  EXPECT_EQ(AutoShuffleMix(o, true), 0);
  o = Opts(1, -1);
  EXPECT_EQ(AutoShuffleMix(o, true), 0) << "single rows: already a permutation";
  o = Opts(100, 3);
  EXPECT_EQ(AutoShuffleMix(o, false), 3) << "given, it is kept";
  EXPECT_EQ(ParquetGroupsKept(4, 0), 6u);
  EXPECT_EQ(ParquetGroupsKept(4, 8), 15u);
  EXPECT_FALSE(PlanEpoch({10}, Opts(2, -2), 0).ok());
}

TEST(BlockMixTest, TheOrderSaysWhereTheLayoutStillLimitsTheMix) {
  // Every block in one run: a uniform permutation, nothing to say.
  EXPECT_EQ(DescribeParquetMix(Opts(300, 8), {300}), "");
  EXPECT_EQ(DescribeParquetMix(Opts(50, 8), {400}), "");
  const std::string wide = DescribeParquetMix(Opts(50, 8), {4000});
  EXPECT_NE(wide.find("8 blocks of row groups (about 400 of 4000 rows)"), std::string::npos) << wide;
  EXPECT_NE(wide.find("write the rows shuffled"), std::string::npos) << wide;
  const std::string none = DescribeParquetMix(Opts(50, 0), {400});
  EXPECT_NE(none.find("file order"), std::string::npos) << none;
  LoaderOptions ordered = Opts(50, 8);
  ordered.shuffle = false;
  EXPECT_EQ(DescribeParquetMix(ordered, {4000}), "");
  EXPECT_NE(DescribeOrder(Opts(50, 8)).find("every 8 consecutive blocks mixed"), std::string::npos);
}

}  // namespace
}  // namespace stoker
