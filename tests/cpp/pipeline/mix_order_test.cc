// tests/cpp/pipeline/mix_order_test.cc — the mixture's order (mix_order.h),
// counts only, no data: the allocation's shares against the weights, each
// source's draws exactly once per pass of its own, the proportion law and
// the exact partition covering every sample of every source once, equal
// batch counts on 2 and 3 ranks, a resume from the middle of an epoch (same
// world size and another, elastic) continuing the uninterrupted run, the
// same order from any number of threads, and 100 sources of 1,000 shards
// planned without a per-sample list.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>
#include <vector>

#include "core/random.h"
#include "pipeline/elastic.h"
#include "pipeline/mix_order.h"
#include "pipeline/planner.h"

namespace stoker {
namespace {

// Sources of uneven shard sizes: shards[s] shards of 5..40 samples.
std::vector<uint32_t> Counts(const std::vector<uint32_t>& shards, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<uint32_t> c;
  for (uint32_t n : shards)
    for (uint32_t i = 0; i < n; ++i) c.push_back(static_cast<uint32_t>(5 + rng.Below(36)));
  return c;
}

LoaderOptions Mix(const std::vector<uint32_t>& shards, std::vector<double> weights, MixLaw law = MixLaw::kSample,
                  int64_t per_epoch = 0) {
  LoaderOptions o;
  o.batch_size = 16;
  o.shuffle = true;
  o.seed = 42;
  o.drop_last = false;
  o.shuffle_block = 1;
  o.shuffle_window = 0;
  o.shuffle_mix = 0;
  for (size_t s = 0; s < shards.size(); ++s) o.mix.names.push_back("s" + std::to_string(s));
  o.mix.weights = std::move(weights);
  o.mix.shards = shards;
  o.mix.law = law;
  o.mix.samples_per_epoch = per_epoch;
  return o;
}

// The source of dataset sample g.
uint32_t SourceOf(const std::vector<uint32_t>& counts, const std::vector<uint32_t>& shards, uint32_t shard) {
  uint32_t first = 0;
  for (uint32_t s = 0; s < shards.size(); ++s) {
    if (shard < first + shards[s]) return s;
    first += shards[s];
  }
  (void)counts;
  return UINT32_MAX;
}

TEST(MixAllocation, SharesWithinTreeDepthOfWeights) {
  const std::vector<uint64_t> w = {5, 3, 2, 7, 1};
  const MixAllocation a(w, 9);
  std::vector<uint64_t> seen(w.size(), 0);
  for (uint64_t g = 0; g < 20000; ++g) {
    const MixAllocation::Draw d = a.Locate(g);
    ASSERT_EQ(d.k, seen[d.source]) << "draws of a source come in stream order";
    ++seen[d.source];
    if (g % 97 == 0) {
      for (size_t s = 0; s < w.size(); ++s) {
        ASSERT_EQ(a.Count(s, g + 1), seen[s]);
        // depth 3: within 3 of the exact share.
        ASSERT_LE(std::fabs(static_cast<double>(seen[s]) - (g + 1) * w[s] / 18.0), 3.0) << s << " at " << g;
      }
    }
  }
}

TEST(MixOrder, EachSourceOncePerPassAcrossEpochs) {
  const std::vector<uint32_t> shards = {3, 1, 2};
  const std::vector<uint32_t> counts = Counts(shards, 1);
  const LoaderOptions o = Mix(shards, {0.5, 0.3, 0.2}, MixLaw::kSample, 1000);
  // Draws of each source over three epochs, in stream order: pass p is draws
  // [p N, (p + 1) N), each sample once.
  std::vector<std::vector<uint64_t>> draws(3);
  std::vector<uint64_t> n(3, 0);
  for (uint64_t e = 0; e < 3; ++e) {
    auto order = MixOrder::Make(counts, o, e);
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    const MixOrder& m = **order;
    n = m.source_samples();
    std::vector<std::map<uint64_t, uint64_t>> by_k(3);  // k -> sample, this epoch
    for (uint64_t p = 0; p < m.size(); ++p) {
      const SampleRef r = m.At(p);
      const MixAllocation::Draw d = m.DrawAt(p);
      ASSERT_EQ(m.SourceOfShard(r.shard), d.source);
      ASSERT_EQ(SourceOf(counts, shards, r.shard), d.source);
      by_k[d.source][d.k] = r.global;
    }
    const std::vector<uint64_t> before = m.DrawnBefore();
    for (uint32_t s = 0; s < 3; ++s) {
      ASSERT_EQ(before[s], draws[s].size()) << "epoch " << e << " continues source " << s << "'s stream";
      for (auto& [k, g] : by_k[s]) {
        ASSERT_EQ(k, draws[s].size());
        draws[s].push_back(g);
      }
    }
  }
  for (uint32_t s = 0; s < 3; ++s) {
    for (size_t p = 0; (p + 1) * n[s] <= draws[s].size(); ++p) {
      std::vector<uint64_t> pass(draws[s].begin() + p * n[s], draws[s].begin() + (p + 1) * n[s]);
      std::sort(pass.begin(), pass.end());
      ASSERT_EQ(std::adjacent_find(pass.begin(), pass.end()), pass.end()) << "source " << s << " pass " << p;
    }
  }
}

TEST(MixOrder, ProportionExactPartitionCoversEverySampleOnce) {
  const std::vector<uint32_t> shards = {4, 2, 1};
  const std::vector<uint32_t> counts = Counts(shards, 2);
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  for (int world : {1, 2, 3}) {
    std::vector<uint64_t> seen;
    std::vector<int64_t> batches;
    for (int r = 0; r < world; ++r) {
      LoaderOptions o = Mix(shards, {}, MixLaw::kProportion);
      o.partition = PartitionPolicy::kExact;
      o.world_size = world;
      o.rank = r;
      auto plan = PlanEpoch(counts, o, 1);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      batches.push_back(plan->info.batches);
      for (int64_t i = 0; i < plan->info.rank_samples; ++i) seen.push_back(plan->At(i).global);
    }
    ASSERT_EQ(*std::min_element(batches.begin(), batches.end()), *std::max_element(batches.begin(), batches.end()));
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen.size(), total);
    for (uint64_t g = 0; g < total; ++g) ASSERT_EQ(seen[g], g);
  }
}

TEST(MixOrder, RanksEqualAndResumeContinues) {
  const std::vector<uint32_t> shards = {3, 3, 2};
  const std::vector<uint32_t> counts = Counts(shards, 3);
  for (int world : {2, 3}) {
    std::vector<int64_t> batches;
    for (int r = 0; r < world; ++r) {
      LoaderOptions o = Mix(shards, {0.2, 0.5, 0.3}, MixLaw::kSample, 777);
      o.world_size = world;
      o.rank = r;
      o.drop_last = true;
      auto plan = PlanEpoch(counts, o, 2);
      ASSERT_TRUE(plan.ok());
      batches.push_back(plan->info.batches);
    }
    ASSERT_EQ(*std::min_element(batches.begin(), batches.end()), *std::max_element(batches.begin(), batches.end()));
  }
  // Elastic: 2 ranks deliver 5 batches each, then 3 ranks take the rest: together
  // every position of the epoch once, as the uninterrupted order has them.
  LoaderOptions o = Mix(shards, {0.2, 0.5, 0.3}, MixLaw::kSample, 640);
  o.partition = PartitionPolicy::kExact;
  std::vector<uint64_t> got, want;
  {
    auto whole = PlanEpoch(counts, o, 1);
    ASSERT_TRUE(whole.ok());
    for (int64_t i = 0; i < whole->info.rank_samples; ++i) want.push_back(whole->At(i).global);
  }
  for (int r = 0; r < 2; ++r) {
    LoaderOptions a = o;
    a.world_size = 2;
    a.rank = r;
    auto plan = PlanEpoch(counts, a, 1);
    ASSERT_TRUE(plan.ok());
    for (int64_t i = 0; i < 5 * o.batch_size; ++i) got.push_back(plan->At(i).global);
  }
  for (int r = 0; r < 3; ++r) {
    LoaderOptions b = o;
    b.world_size = 3;
    b.rank = r;
    auto plan = PlanRemaining(counts, b, 1, {{2, 5}});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    for (int64_t i = 0; i < plan->info.rank_samples; ++i) got.push_back(plan->At(i).global);
  }
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  ASSERT_EQ(got, want);
}

TEST(MixOrder, SameOrderFromAnyThreadCount) {
  const std::vector<uint32_t> shards = {5, 1, 3, 2};
  const std::vector<uint32_t> counts = Counts(shards, 4);
  LoaderOptions o = Mix(shards, {0.4, 0.1, 0.3, 0.2}, MixLaw::kSample, 4000);
  o.shuffle_block = 4;  // each source's passes in blocks, as over remote shards
  auto order = MixOrder::Make(counts, o, 3);
  ASSERT_TRUE(order.ok());
  const MixOrder& m = **order;
  std::vector<uint64_t> one(m.size());
  for (uint64_t p = 0; p < m.size(); ++p) one[p] = m.At(p).global;
  std::vector<uint64_t> many(m.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t p = m.size() - 1 - t; p < m.size(); p -= std::min<uint64_t>(p + 1, 8)) many[p] = m.At(p).global;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(one, many);
}

TEST(MixOrder, CountInEqualsAWalkOfTheRange) {
  const std::vector<uint32_t> shards = {2, 3, 1};
  const std::vector<uint32_t> counts = Counts(shards, 7);
  for (int variant = 0; variant < 3; ++variant) {
    const bool one_source = variant == 2;  // batch-size units of one source
    LoaderOptions o = Mix(shards, {0.3, 0.5, 0.2}, MixLaw::kSample, one_source ? 992 : 997);
    o.shuffle = variant != 1;
    o.mix.one_source_per_batch = one_source;
    auto order = MixOrder::Make(counts, o, 2);
    ASSERT_TRUE(order.ok());
    const MixOrder& m = **order;
    SplitMix64 rng(8);
    for (int t = 0; t < 200; ++t) {
      uint64_t a = rng.Below(m.size() + 1), b = rng.Below(m.size() + 1);
      if (a > b) std::swap(a, b);
      std::vector<uint64_t> walk(3, 0);
      for (uint64_t p = a; p < b; ++p) ++walk[m.SourceOfShard(m.At(p).shard)];
      ASSERT_EQ(m.CountIn(a, b), walk) << a << ".." << b;
    }
    if (one_source) {  // every batch of 16 positions one source's, its draws consecutive
      for (uint64_t p = 0; p < m.size(); p += 16) {
        for (uint64_t q = p + 1; q < p + 16; ++q) ASSERT_EQ(m.DrawAt(q).source, m.DrawAt(p).source);
      }
    }
  }
}

TEST(MixOrder, StopAtFirstEndsBeforeASourceRunsOut) {
  const std::vector<uint32_t> shards = {2, 1};
  const std::vector<uint32_t> counts = Counts(shards, 5);
  const LoaderOptions o = Mix(shards, {0.5, 0.5}, MixLaw::kStopAtFirst);
  auto order = MixOrder::Make(counts, o, 4);
  ASSERT_TRUE(order.ok());
  const MixOrder& m = **order;
  std::vector<uint64_t> drawn(2, 0);
  for (uint64_t p = 0; p < m.size(); ++p) ++drawn[m.DrawAt(p).source];
  const uint64_t small = std::min(m.source_samples()[0], m.source_samples()[1]);
  EXPECT_EQ(std::min(drawn[0], drawn[1]), small);
  EXPECT_LE(std::max(drawn[0], drawn[1]), small + 1);
}

TEST(MixOrder, CountsGiveEachSourceItsExactDrawsEveryEpoch) {
  // Mosaic's repeat/choose: seven sources of uneven sizes, fractional repeats
  // and chooses above and below a source's size; every epoch, counted by
  // walking it, holds exactly each source's count, and the passes run on.
  const std::vector<uint32_t> shards = {3, 1, 2, 4, 1, 2, 5};
  const std::vector<uint32_t> counts = Counts(shards, 9);
  LoaderOptions o = Mix(shards, {1, 0.37, 2.5, 1, 0, 1, 0.9}, MixLaw::kCounts);
  o.mix.choose = {-1, -1, -1, 7, 500, -1, -1};
  const std::vector<uint64_t> n = MixSourceSamples(counts, o);
  auto expected = EpochCounts(o.mix, n);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ((*expected)[1], static_cast<uint64_t>(std::llround(0.37 * n[1])));
  EXPECT_EQ((*expected)[3], 7u);
  EXPECT_EQ((*expected)[4], 500u);
  uint64_t total = 0;
  for (uint64_t c : *expected) total += c;
  for (uint64_t epoch : {0u, 1u, 7u}) {
    auto order = MixOrder::Make(counts, o, epoch);
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    const MixOrder& m = **order;
    ASSERT_EQ(m.size(), total);
    std::vector<uint64_t> drawn(shards.size(), 0);
    for (uint64_t p = 0; p < m.size(); ++p) ++drawn[m.DrawAt(p).source];
    EXPECT_EQ(drawn, *expected) << "epoch " << epoch;
    for (size_t s = 0; s < shards.size(); ++s) EXPECT_EQ(m.DrawnBefore()[s], epoch * (*expected)[s]) << s;
  }
  o.mix.choose = {0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(MixOrder::Make(counts, o, 0).ok());
}

TEST(StreamMixOrder, SharesByWeightAndDrawsBeforeCountTheWalk) {
  // A stream mixture's positions: each block of batch_size within a few
  // draws of the weights, and DrawsBefore at every block's edge equal to a
  // walk of SourceAt over the positions before it (a resume replays each
  // source to exactly that many draws).
  LoaderOptions o = Mix({3, 2, 2}, {0.5, 0.3, 0.2});
  for (int rank : {0, 1}) {
    o.rank = rank;
    o.world_size = 2;
    const StreamMixOrder order = StreamMixOrder::Make(o).value();
    ASSERT_EQ(order.num_sources(), 3u);
    std::vector<uint64_t> walked(3, 0);
    for (uint64_t b = 0; b < 200; ++b) {
      for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ(order.DrawsBefore(s, b * 16), walked[s]) << s << " " << b;
      std::vector<uint64_t> in_block(3, 0);
      for (uint64_t p = b * 16; p < (b + 1) * 16; ++p) ++in_block[order.SourceAt(p)];
      for (uint32_t s = 0; s < 3; ++s) {
        EXPECT_LE(std::abs(static_cast<double>(in_block[s]) - 16 * o.mix.weights[s]), 3.0) << s;
        walked[s] += in_block[s];
      }
    }
  }
  // Weights changed from batch 100 on: the draws before it stay, the walk
  // goes on counting, and the blocks after it follow the new weights.
  o.rank = 0;
  StreamMixOrder changed = StreamMixOrder::Make(o).value();
  const StreamMixOrder before = changed;
  ASSERT_TRUE(changed.Rebase(100 * 16, {0.1, 0.1, 0.8}).ok());
  EXPECT_FALSE(changed.Rebase(100 * 16 + 3, {0.1, 0.1, 0.8}).ok());  // not a batch's first position
  std::vector<uint64_t> walked(3, 0);
  for (uint64_t b = 0; b < 300; ++b) {
    for (uint32_t s = 0; s < 3; ++s) {
      EXPECT_EQ(changed.DrawsBefore(s, b * 16), walked[s]) << s << " " << b;
      if (b <= 100) EXPECT_EQ(changed.DrawsBefore(s, b * 16), before.DrawsBefore(s, b * 16));
    }
    std::vector<uint64_t> in_block(3, 0);
    for (uint64_t p = b * 16; p < (b + 1) * 16; ++p) {
      ++in_block[changed.SourceAt(p)];
      if (b < 100) EXPECT_EQ(changed.SourceAt(p), before.SourceAt(p));
    }
    if (b >= 100) EXPECT_LE(std::abs(static_cast<double>(in_block[2]) - 16 * 0.8), 3.0) << b;
    for (uint32_t s = 0; s < 3; ++s) walked[s] += in_block[s];
  }
  ASSERT_EQ(changed.changes().size(), 1u);
  EXPECT_EQ(changed.changes()[0].from, 1600u);
  // One source a batch: every block is one source's.
  o.mix.one_source_per_batch = true;
  const StreamMixOrder units = StreamMixOrder::Make(o).value();
  for (uint64_t b = 0; b < 50; ++b) {
    for (uint64_t p = b * 16; p < (b + 1) * 16; ++p) EXPECT_EQ(units.SourceAt(p), units.SourceAt(b * 16));
  }
  // A stream counts no source: only law sample mixes streams.
  o.mix.law = MixLaw::kProportion;
  EXPECT_FALSE(StreamMixOrder::Make(o).ok());
  // One dataset: source 0 everywhere, its draws the positions.
  LoaderOptions one;
  const StreamMixOrder single = StreamMixOrder::Make(one).value();
  EXPECT_EQ(single.num_sources(), 1u);
  EXPECT_EQ(single.SourceAt(12345), 0u);
  EXPECT_EQ(single.DrawsBefore(0, 320), 320u);
}

TEST(MixOrder, HundredSourcesOfAThousandShardsInBoundedMemory) {
  // 100 sources x 1,000 shards x ~10,000 samples: 1e9 samples. A rank's plan
  // and its first batches touch O(shards) memory, never a list of samples.
  const uint32_t sources = 100, per = 1000;
  std::vector<uint32_t> shards(sources, per);
  std::vector<uint32_t> counts(static_cast<size_t>(sources) * per);
  SplitMix64 rng(6);
  for (uint32_t& c : counts) c = static_cast<uint32_t>(5000 + rng.Below(10000));
  std::vector<double> w(sources);
  for (uint32_t s = 0; s < sources; ++s) w[s] = 1.0 + s % 7;
  LoaderOptions o = Mix(shards, w, MixLaw::kSample, 0);
  o.world_size = 64;
  o.rank = 17;
  o.batch_size = 256;
  const size_t before = mallinfo2().uordblks;
  auto plan = PlanEpoch(counts, o, 5);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_GT(plan->info.dataset_samples, 900'000'000);
  std::vector<uint32_t> per_source(sources, 0);
  for (int64_t i = 0; i < 1000 * 256; ++i) ++per_source[SourceOf(counts, shards, plan->At(i).shard)];
  const size_t grown = mallinfo2().uordblks - before;
  // The pass orders kept (kPassesKept per source, O(shards) each) and the tree: a few MB.
  EXPECT_LT(grown, 64u << 20) << grown;
  // Weight 1..7 over 100 sources (sum 397): source 6 (weight 7) about 7/397 of 256,000.
  EXPECT_NEAR(per_source[6], 256000.0 * 7 / 397, 256000.0 * 7 / 397 * 0.05);
}

}  // namespace
}  // namespace stoker
