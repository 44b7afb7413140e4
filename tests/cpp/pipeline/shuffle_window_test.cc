// tests/cpp/pipeline/shuffle_window_test.cc — the windowed shuffle
// (shuffle_window K > 0, planner.h): a permutation of every sample whose K
// shards at a time are read to their end before the next K begin, a pure
// function of (seed, epoch) whatever the world size, the contracts of the
// other orders (exactly once, exact partition, elastic resume), safe from
// many threads; and shuffle_window 0 (or -1 unresolved) keeps the orders
// made before it existed, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "core/random.h"
#include "pipeline/elastic.h"
#include "pipeline/mix_seed.h"
#include "pipeline/planner.h"

namespace stoker {
namespace {

// Uneven shards, empty ones and shards shorter than a block among them.
const std::vector<std::vector<uint32_t>> kDatasets = {
    {100, 37, 64, 0, 250, 5, 1, 90, 0, 41, 77, 12},
    {17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17},
    {300},
    {3, 0, 9},
};

uint64_t Total(const std::vector<uint32_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), uint64_t{0});
}

LoaderOptions Opts(int window, int block, uint64_t seed = 5) {
  LoaderOptions o;
  o.shuffle = true;
  o.seed = seed;
  o.shuffle_window = window;
  o.shuffle_block = block;
  o.batch_size = 1;
  o.drop_last = false;
  return o;
}

// The epoch's whole order, position by position.
std::vector<SampleRef> Order(const std::vector<uint32_t>& counts, const LoaderOptions& o, uint64_t epoch) {
  auto order = EpochOrder::Make(counts, o, epoch);
  EXPECT_TRUE(order.ok()) << order.status().ToString();
  std::vector<SampleRef> v;
  for (uint64_t p = 0; p < (*order)->size(); ++p) v.push_back((*order)->At(p));
  return v;
}

std::vector<uint64_t> Globals(const std::vector<SampleRef>& v) {
  std::vector<uint64_t> g;
  for (const SampleRef& r : v) g.push_back(r.global);
  return g;
}

// The orders as EpochOrder computed them before shuffle_window existed (a
// copy of that code): single samples through one IndexShuffle of [0, N),
// blocks cut at phases drawn shard after shard and permuted together.
std::vector<uint64_t> OrderBeforeWindows(const std::vector<uint32_t>& counts, uint64_t seed, int block,
                                         uint64_t epoch) {
  std::vector<uint64_t> first(counts.size() + 1, 0);
  for (size_t s = 0; s < counts.size(); ++s) first[s + 1] = first[s] + counts[s];
  const uint64_t total = first.back();
  SplitMix64 rng(MixSeed(seed, epoch, 0x5EED));
  std::vector<uint64_t> out;
  if (block <= 1) {
    const IndexShuffle perm(total, rng.Next());
    for (uint64_t p = 0; p < total; ++p) out.push_back(perm(p));
    return out;
  }
  const uint32_t b = static_cast<uint32_t>(block);
  struct Piece {
    uint32_t shard, begin, end;
  };
  std::vector<Piece> blocks;
  for (uint32_t s = 0; s < counts.size(); ++s) {
    const uint32_t n = counts[s];
    if (n == 0) continue;
    const uint64_t span = n >= 2 * b && n < 3 * b ? n - 2 * b + 1 : b;
    const uint32_t phase = static_cast<uint32_t>(rng.Below(span));
    uint32_t begin = 0;
    for (uint64_t cut = phase == 0 ? b : phase + uint64_t{b}; cut + b <= n; cut += b) {
      blocks.push_back({s, begin, static_cast<uint32_t>(cut)});
      begin = static_cast<uint32_t>(cut);
    }
    blocks.push_back({s, begin, n});
  }
  const IndexShuffle perm(blocks.size(), rng.Next());
  for (size_t j = 0; j < blocks.size(); ++j) {
    const Piece& piece = blocks[perm(j)];
    for (uint32_t i = piece.begin; i < piece.end; ++i) out.push_back(first[piece.shard] + i);
  }
  return out;
}

TEST(ShuffleWindowTest, WindowZeroAndUnresolvedAutoKeepTheWholeDatasetOrders) {
  for (const auto& counts : kDatasets) {
    for (int block : {1, 2, 3, 8, 16}) {
      for (uint64_t epoch : {0, 1, 7}) {
        const std::vector<uint64_t> want = OrderBeforeWindows(counts, 5, block, epoch);
        EXPECT_EQ(Globals(Order(counts, Opts(0, block), epoch)), want) << "block " << block << " epoch " << epoch;
        EXPECT_EQ(Globals(Order(counts, Opts(-1, block), epoch)), want) << "block " << block << " epoch " << epoch;
      }
    }
  }
}

TEST(ShuffleWindowTest, APermutationOfEverySample) {
  for (const auto& counts : kDatasets) {
    for (int window : {1, 2, 3, 5, 100}) {
      for (int block : {1, 2, 8}) {
        std::vector<uint64_t> g = Globals(Order(counts, Opts(window, block), 3));
        ASSERT_EQ(g.size(), Total(counts));
        std::sort(g.begin(), g.end());
        for (uint64_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], i) << "window " << window << " block " << block;
      }
    }
  }
}

// Walking the order, the shards begun and not yet finished: at most K, as
// each window's shards are read to their end before the next window's begin.
size_t MostShardsOpen(const std::vector<uint32_t>& counts, const std::vector<SampleRef>& order) {
  std::vector<uint32_t> left = counts;
  std::set<uint32_t> open;
  size_t most = 0;
  for (const SampleRef& r : order) {
    open.insert(r.shard);
    most = std::max(most, open.size());
    if (--left[r.shard] == 0) open.erase(r.shard);
  }
  return most;
}

TEST(ShuffleWindowTest, EachWindowsShardsAreReadToTheirEndBeforeTheNextBegin) {
  const auto& counts = kDatasets[0];
  for (int window : {1, 2, 3, 5}) {
    for (int block : {1, 4}) {
      const LoaderOptions o = Opts(window, block);
      EXPECT_LE(MostShardsOpen(counts, Order(counts, o, 2)), static_cast<size_t>(window));
      // The windows as the order reports them: K permuted shards each (the
      // last fewer), every shard in one, and positions [begin, end) hold
      // exactly their samples, windows one after another.
      auto order = EpochOrder::Make(counts, o, 2);
      ASSERT_TRUE(order.ok());
      const EpochOrder& eo = **order;
      ASSERT_EQ(eo.num_windows(), (counts.size() + window - 1) / window);
      std::set<uint32_t> all;
      uint64_t next = 0;
      for (size_t w = 0; w < eo.num_windows(); ++w) {
        const std::vector<uint32_t> shards = eo.WindowShards(w);
        ASSERT_EQ(shards.size(), std::min<size_t>(window, counts.size() - w * window));
        uint64_t samples = 0;
        for (uint32_t s : shards) samples += counts[s], all.insert(s);
        const auto [begin, end] = eo.WindowPositions(w);
        ASSERT_EQ(begin, next);
        ASSERT_EQ(end - begin, samples);
        const std::set<uint32_t> mine(shards.begin(), shards.end());
        for (uint64_t p = begin; p < end; ++p) {
          ASSERT_TRUE(mine.count(eo.At(p).shard)) << "window " << w << " position " << p;
          ASSERT_EQ(eo.WindowOf(p), w);
        }
        next = end;
      }
      EXPECT_EQ(next, eo.size());
      EXPECT_EQ(all.size(), counts.size());
    }
  }
  // The whole-dataset order leaves nearly every shard open at once.
  EXPECT_GT(MostShardsOpen(counts, Order(counts, Opts(0, 1), 2)), 5u);
}

TEST(ShuffleWindowTest, ARanksBatchesDrawFromAWindowOrTwoAtATime) {
  // 40 shards of 30: 8 ranks of 150 samples, batches of 16.
  const std::vector<uint32_t> counts(40, 30);
  const int window = 2;
  for (int block : {1, 4}) {
    for (int rank = 0; rank < 8; ++rank) {
      LoaderOptions o = Opts(window, block);
      o.world_size = 8;
      o.rank = rank;
      o.batch_size = 16;
      auto plan = PlanEpoch(counts, o, 1);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      std::set<uint32_t> rank_shards;
      for (int64_t b = 0; b < plan->info.batches; ++b) {
        std::set<uint32_t> shards;
        for (int64_t i = b * 16; i < std::min<int64_t>((b + 1) * 16, plan->info.rank_samples); ++i) {
          shards.insert(plan->At(i).shard);
        }
        // K shards, 2K where the batch crosses a window's edge.
        EXPECT_LE(shards.size(), 2u * window) << "rank " << rank << " batch " << b;
        rank_shards.insert(shards.begin(), shards.end());
      }
      // 150 samples are 2.5 windows of 60: they meet 3 or 4 windows, not the 40 shards.
      EXPECT_LE(rank_shards.size(), 4u * window) << "rank " << rank;
    }
  }
}

TEST(ShuffleWindowTest, APureFunctionOfSeedAndEpochThatMovesEveryEpoch) {
  const auto& counts = kDatasets[0];
  for (int block : {1, 4}) {
    const auto a = Globals(Order(counts, Opts(3, block), 4));
    EXPECT_EQ(a, Globals(Order(counts, Opts(3, block), 4)));
    EXPECT_NE(a, Globals(Order(counts, Opts(3, block), 5))) << "another epoch, another order";
    EXPECT_NE(a, Globals(Order(counts, Opts(3, block, 6), 4))) << "another seed, another order";
    EXPECT_NE(a, Globals(Order(counts, Opts(4, block), 4))) << "another window, another order";
    // The shards' order moves too, not only the samples inside each window.
    auto first_shards = [&](uint64_t epoch) {
      auto order = EpochOrder::Make(counts, Opts(3, block), epoch);
      return (*order)->WindowShards(0);
    };
    std::set<std::vector<uint32_t>> firsts;
    for (uint64_t e = 0; e < 6; ++e) firsts.insert(first_shards(e));
    EXPECT_GT(firsts.size(), 1u);
  }
}

TEST(ShuffleWindowTest, BlocksStayWholeInsideTheirShardWithEdgesThatMove) {
  const std::vector<uint32_t> counts(6, 200);
  const int block = 8;
  std::set<std::vector<uint64_t>> edges_by_epoch;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<SampleRef> order = Order(counts, Opts(2, block), epoch);
    // Maximal runs of consecutive samples of one shard: each a block or
    // several, so at least B long (shards hold 200 >= 2B).
    std::vector<uint64_t> edges;
    size_t begin = 0;
    for (size_t i = 1; i <= order.size(); ++i) {
      if (i == order.size() || order[i].shard != order[i - 1].shard || order[i].sample != order[i - 1].sample + 1) {
        EXPECT_GE(i - begin, static_cast<size_t>(block));
        if (order[begin].sample != 0) edges.push_back(order[begin].global);
        begin = i;
      }
    }
    std::sort(edges.begin(), edges.end());
    edges_by_epoch.insert(edges);
  }
  EXPECT_EQ(edges_by_epoch.size(), 3u) << "the blocks' edges move between epochs";
}

TEST(ShuffleWindowTest, RanksCutTheSameOrderOnAnyWorldSize) {
  const auto& counts = kDatasets[0];
  const uint64_t total = Total(counts);
  for (int block : {1, 4}) {
    const std::vector<uint64_t> whole = Globals(Order(counts, Opts(3, block), 6));
    for (int world : {1, 2, 3, 7}) {
      std::vector<uint64_t> joined;
      int64_t batches = -1;
      for (int rank = 0; rank < world; ++rank) {
        LoaderOptions o = Opts(3, block);
        o.partition = PartitionPolicy::kExact;
        o.world_size = world;
        o.rank = rank;
        o.batch_size = 8;
        auto plan = PlanEpoch(counts, o, 6);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        if (batches >= 0) {
          ASSERT_EQ(plan->info.batches, batches) << "equal batches per rank";
        }
        batches = plan->info.batches;
        for (int64_t i = 0; i < plan->info.rank_samples; ++i) joined.push_back(plan->At(i).global);
      }
      EXPECT_EQ(joined.size(), total);
      EXPECT_EQ(joined, whole) << "world " << world << ": the ranks' parts, in rank order, are the order";
    }
  }
}

TEST(ShuffleWindowTest, ElasticResumeContinuesTheUninterruptedRun) {
  const auto& counts = kDatasets[0];
  for (int block : {1, 4}) {
    LoaderOptions o = Opts(2, block);
    o.batch_size = 4;
    o.world_size = 3;
    std::multiset<uint64_t> still_to_come;
    for (int rank = 0; rank < 3; ++rank) {
      o.rank = rank;
      auto whole = PlanEpoch(counts, o, 1);
      ASSERT_TRUE(whole.ok());
      auto rest = PlanRemaining(counts, o, 1, {{3, 5}});
      ASSERT_TRUE(rest.ok()) << rest.status().ToString();
      ASSERT_EQ(rest->info.rank_samples, whole->info.rank_samples - 20);
      for (int64_t i = 0; i < rest->info.rank_samples; ++i) {
        ASSERT_EQ(rest->At(i).global, whole->At(20 + i).global) << "rank " << rank << " position " << i;
        still_to_come.insert(whole->At(20 + i).global);
      }
    }
    // On 2 ranks instead: the same samples still to come, each once (drop
    // policy: at most one left out to equalize the two).
    std::multiset<uint64_t> resumed;
    uint64_t dropped = 0;
    for (int rank = 0; rank < 2; ++rank) {
      LoaderOptions n = o;
      n.world_size = 2;
      n.rank = rank;
      auto rest = PlanRemaining(counts, n, 1, {{3, 5}});
      ASSERT_TRUE(rest.ok()) << rest.status().ToString();
      for (int64_t i = 0; i < rest->info.rank_samples; ++i) resumed.insert(rest->At(i).global);
      dropped = static_cast<uint64_t>(rest->info.dropped_samples);
    }
    EXPECT_EQ(std::set<uint64_t>(resumed.begin(), resumed.end()).size(), resumed.size()) << "no sample twice";
    EXPECT_EQ(resumed.size() + dropped, still_to_come.size());
    for (uint64_t g : resumed) EXPECT_TRUE(still_to_come.count(g));
  }
}

TEST(ShuffleWindowTest, ManyThreadsAskingAcrossManyWindowsGetTheSameOrder) {
  // More windows than the order keeps tables for, asked in an interleaved
  // pattern from 4 threads: every answer equals the single-threaded one.
  const std::vector<uint32_t> counts(64, 50);
  for (int block : {1, 4}) {
    const LoaderOptions o = Opts(1, block);
    const std::vector<uint64_t> want = Globals(Order(counts, o, 0));
    auto order = EpochOrder::Make(counts, o, 0);
    ASSERT_TRUE(order.ok());
    ASSERT_GT((*order)->num_windows(), EpochOrder::kWindowsKept);
    std::vector<std::vector<uint64_t>> got(4, std::vector<uint64_t>(want.size()));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        // Each thread walks the positions with its own stride, so the
        // windows asked for keep changing under the others.
        const uint64_t n = want.size(), stride = 97 + 2 * static_cast<uint64_t>(t);
        for (uint64_t k = 0; k < n; ++k) {
          const uint64_t p = (k * stride + static_cast<uint64_t>(t)) % n;
          got[t][p] = (*order)->At(p).global;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], want) << "thread " << t << " block " << block;
  }
}

TEST(ShuffleWindowTest, RefusesANegativeWindowOtherThanAuto) {
  auto order = EpochOrder::Make({10, 10}, Opts(-2, 1), 0);
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.status().ToString().find("shuffle_window"), std::string::npos) << order.status().ToString();
}

}  // namespace
}  // namespace stoker
