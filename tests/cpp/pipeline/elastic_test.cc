// Elastic resume: after a state saved by W ranks at step n, the W' new ranks
// deliver exactly the samples the uninterrupted W-rank run would still have
// delivered, each once, in equal batch counts; chains of resumes compose.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "pipeline/elastic.h"

namespace stoker {
namespace {

// A plan's samples in delivery order (plans keep no list: At computes each).
std::vector<SampleRef> Refs(const EpochPlan& p) {
  std::vector<SampleRef> v;
  for (int64_t i = 0; i < p.info.rank_samples; ++i) v.push_back(p.At(i));
  return v;
}

LoaderOptions Opts(int world, int rank, int bs, bool shuffle = true) {
  LoaderOptions o;
  o.world_size = world;
  o.rank = rank;
  o.batch_size = bs;
  o.shuffle = shuffle;
  o.seed = 7;
  return o;
}

std::multiset<uint64_t> Globals(const std::vector<SampleRef>& v, size_t from = 0) {
  std::multiset<uint64_t> s;
  for (size_t i = from; i < v.size(); ++i) s.insert(v[i].global);
  return s;
}

// What the uninterrupted W-rank run still delivers after n batches per rank.
std::multiset<uint64_t> StillToCome(const std::vector<uint32_t>& counts, int world, int bs, int64_t n,
                                    bool shuffle = true) {
  std::multiset<uint64_t> s;
  for (int r = 0; r < world; ++r) {
    auto p = PlanEpoch(counts, Opts(world, r, bs, shuffle), 3);
    EXPECT_TRUE(p.ok());
    auto part = Globals(Refs(*p), static_cast<size_t>(n * bs));
    s.insert(part.begin(), part.end());
  }
  return s;
}

TEST(ElasticTest, RestoresOnFewerAndMoreRanksWithExactlyTheRemainingSamples) {
  const std::vector<uint32_t> counts = {50, 70, 40, 80};  // 240 samples
  const int bs = 5;
  for (auto [w, w2] : {std::pair{4, 2}, {2, 3}, {4, 4}, {3, 5}, {1, 4}}) {
    for (int64_t n : {0, 1, 4, 9}) {
      std::multiset<uint64_t> want = StillToCome(counts, w, bs, n);
      std::multiset<uint64_t> got;
      int64_t batches = -1;
      for (int r = 0; r < w2; ++r) {
        auto p = PlanRemaining(counts, Opts(w2, r, bs), 3, {{w, n}});
        ASSERT_TRUE(p.ok()) << p.status().message();
        if (batches < 0) batches = p->info.batches;
        EXPECT_EQ(p->info.batches, batches) << "equal batches per new rank";
        EXPECT_EQ(p->info.rank_samples, p->info.batches * bs);
        auto g = Globals(Refs(*p));
        got.insert(g.begin(), g.end());
      }
      // Each delivered once, all from the remaining set; only the cut to equal
      // whole batches may drop some (fewer than w2 * bs), as for a fresh epoch.
      EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size());
      EXPECT_TRUE(std::includes(want.begin(), want.end(), got.begin(), got.end()));
      EXPECT_LT(want.size() - got.size(), static_cast<size_t>(w2 * bs)) << w << "->" << w2 << " at " << n;
    }
  }
}

TEST(ElasticTest, SameWorldAtStepZeroIsTheOriginalPartitionWhenItDividesEvenly) {
  const std::vector<uint32_t> counts = {60, 60};  // 120 = 4 ranks x 6 batches x 5
  for (int r = 0; r < 4; ++r) {
    auto fresh = PlanEpoch(counts, Opts(4, r, 5), 3);
    auto again = PlanRemaining(counts, Opts(4, r, 5), 3, {{4, 0}});
    ASSERT_TRUE(fresh.ok() && again.ok());
    ASSERT_EQ(fresh->info.rank_samples, again->info.rank_samples);
    for (int64_t i = 0; i < fresh->info.rank_samples; ++i) EXPECT_EQ(fresh->At(i).global, again->At(i).global);
  }
}

TEST(ElasticTest, ChainedResumesCoverEverySampleOnce) {
  const std::vector<uint32_t> counts = {120};  // 4 ranks: 30 each; bs 3 -> 10 batches
  const int bs = 3;
  std::multiset<uint64_t> seen;
  for (int r = 0; r < 4; ++r) {  // stage 1: 4 ranks deliver 2 batches
    auto p = PlanEpoch(counts, Opts(4, r, bs), 3);
    for (int64_t i = 0; i < 2 * bs; ++i) seen.insert(p->At(i).global);
  }
  for (int r = 0; r < 2; ++r) {  // stage 2: 2 ranks deliver 3 batches
    auto p = PlanRemaining(counts, Opts(2, r, bs), 3, {{4, 2}});
    ASSERT_TRUE(p.ok());
    for (int64_t i = 0; i < 3 * bs; ++i) seen.insert(p->At(i).global);
  }
  for (int r = 0; r < 3; ++r) {  // stage 3: 3 ranks deliver the rest
    auto p = PlanRemaining(counts, Opts(3, r, bs), 3, {{4, 2}, {2, 3}});
    ASSERT_TRUE(p.ok());
    for (const SampleRef& s : Refs(*p)) seen.insert(s.global);
  }
  EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), seen.size()) << "no sample twice";
  // 24 + 18, then 78 left: 3 ranks x 26 -> 8 whole batches of 3 each (72); 6 dropped by drop_last.
  EXPECT_EQ(seen.size(), 24u + 18u + 72u);
}

TEST(ElasticTest, RejectsAStepPastTheEpoch) {
  auto p = PlanRemaining({100}, Opts(2, 0, 5), 0, {{4, 6}});  // 25 per rank: 5 batches
  EXPECT_FALSE(p.ok());
}

}  // namespace
}  // namespace stoker
