#include "pipeline/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace stoker {
namespace {

// A plan's samples in delivery order (plans keep no list: At computes each).
std::vector<SampleRef> Refs(const EpochPlan& p) {
  std::vector<SampleRef> v;
  for (int64_t i = 0; i < p.info.rank_samples; ++i) v.push_back(p.At(i));
  return v;
}

std::vector<uint64_t> Globals(const EpochPlan& plan) {
  std::vector<uint64_t> g;
  for (const SampleRef& r : Refs(plan)) g.push_back(r.global);
  return g;
}

LoaderOptions Options(bool shuffle, int buffer, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = shuffle;
  o.shuffle_buffer = buffer;
  o.seed = 7;
  o.rank = rank;
  o.world_size = world;
  return o;
}

const std::vector<uint32_t> kShards = {10, 7, 13, 3};  // 33 samples

TEST(PlannerTest, UnshuffledIsShardThenMemberOrder) {
  LoaderOptions o = Options(false, 0);
  o.drop_last = false;
  auto plan = PlanEpoch(kShards, o, 0);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<uint64_t> want(33);
  for (uint64_t i = 0; i < 33; ++i) want[i] = i;
  EXPECT_EQ(Globals(*plan), want);
  EXPECT_EQ(plan->info.batches, 9);  // 8 full + a short one
  EXPECT_EQ(plan->At(10).shard, 1u);
  EXPECT_EQ(plan->At(10).sample, 0u);
}

TEST(PlannerTest, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  for (int buffer : {0, 5}) {
    LoaderOptions o = Options(true, buffer);
    o.drop_last = false;
    auto a = PlanEpoch(kShards, o, 1), b = PlanEpoch(kShards, o, 1), c = PlanEpoch(kShards, o, 2);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(Globals(*a), Globals(*b));
    EXPECT_NE(Globals(*a), Globals(*c));
    std::vector<uint64_t> sorted = Globals(*a);
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
    EXPECT_EQ(sorted.size(), 33u);
  }
}

TEST(PlannerTest, RanksPartitionExactlyWithEqualBatchCounts) {
  for (PartitionPolicy policy : {PartitionPolicy::kDropRemainder, PartitionPolicy::kPadRepeat}) {
    std::multiset<uint64_t> seen;
    int64_t batches = -1, dropped = -1;
    for (int rank = 0; rank < 3; ++rank) {
      LoaderOptions o = Options(true, 0, rank, 3);
      o.batch_size = 1;
      o.partition = policy;
      auto plan = PlanEpoch(kShards, o, 4);
      ASSERT_TRUE(plan.ok());
      if (batches >= 0) {
        EXPECT_EQ(plan->info.batches, batches);
      }
      batches = plan->info.batches;
      dropped = plan->info.dropped_samples;
      for (uint64_t g : Globals(*plan)) seen.insert(g);
    }
    if (policy == PartitionPolicy::kDropRemainder) {
      EXPECT_EQ(batches, 11);  // 33 / 3
      EXPECT_EQ(dropped, 0);
      EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), seen.size());  // no repeats
      EXPECT_EQ(seen.size(), 33u);
    } else {
      EXPECT_EQ(batches, 11);
    }
  }
  // 34 samples over 3 ranks: drop reports 1, pad repeats 2.
  std::vector<uint32_t> shards = {34};
  LoaderOptions o = Options(false, 0, 2, 3);
  o.batch_size = 1;
  auto dropped = PlanEpoch(shards, o, 0);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->info.dropped_samples, 1);
  EXPECT_EQ(dropped->info.batches, 11);
  o.partition = PartitionPolicy::kPadRepeat;
  auto padded = PlanEpoch(shards, o, 0);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded->info.batches, 12);
  EXPECT_EQ(padded->info.padded_samples, 2);
  EXPECT_EQ(padded->At(padded->info.rank_samples - 1).global, 1u);  // wraps to the start
}

TEST(PlannerTest, DropLastReportsTheCutTail) {
  LoaderOptions o = Options(false, 0);
  auto plan = PlanEpoch(kShards, o, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->info.batches, 8);
  EXPECT_EQ(plan->info.rank_samples, 32);
  EXPECT_EQ(plan->info.dropped_samples, 1);
}

TEST(PlannerTest, StreamingShuffleKeepsReadsLocal) {
  // With a small buffer, a sample is emitted near where it arrives: the
  // distance from its position in shard order is bounded by the stream, so
  // shards are read roughly sequentially.
  std::vector<uint32_t> shards(20, 50);
  LoaderOptions o = Options(true, 16);
  o.batch_size = 1;
  auto plan = PlanEpoch(shards, o, 0);
  ASSERT_TRUE(plan.ok());
  int far = 0;
  for (int64_t i = 1; i < plan->info.rank_samples; ++i) far += plan->At(i).shard != plan->At(i - 1).shard;
  EXPECT_LT(far, 400);  // a global shuffle switches shard on ~95% of steps (~950)
}

TEST(PlannerTest, RejectsImpossibleRequests) {
  LoaderOptions o = Options(false, 0, 3, 3);
  EXPECT_EQ(PlanEpoch(kShards, o, 0).status().code(), StatusCode::kInvalidArgument);
  o = Options(false, 0);
  o.batch_size = 100;
  EXPECT_EQ(PlanEpoch(kShards, o, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanEpoch({}, Options(false, 0), 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(PlannerTest, EmptyShardsAreSteppedOverInEveryOrder) {
  // A sample's shard comes from prefix sums: a shard of no samples shares its
  // start with the next and must never be named.
  const std::vector<uint32_t> shards = {0, 5, 0, 0, 3, 0, 1, 0};
  for (int buffer : {0, 4}) {
    for (int block : {1, 2}) {
      for (bool shuffle : {false, true}) {
        LoaderOptions o = Options(shuffle, buffer);
        o.shuffle_block = block;
        o.batch_size = 1;
        auto plan = PlanEpoch(shards, o, 2);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        std::set<uint64_t> seen;
        for (const SampleRef& r : Refs(*plan)) {
          ASSERT_LT(r.sample, shards[r.shard]) << "shard " << r.shard;
          const uint64_t first = r.shard == 1 ? 0 : r.shard == 4 ? 5 : 8;
          ASSERT_EQ(first + r.sample, r.global);
          seen.insert(r.global);
        }
        EXPECT_EQ(seen.size(), 9u);
      }
    }
  }
}

// Megatron's pretraining sampler: global batches of micro * world, rank r's slice.
TEST(PlanTokenRun, FollowsMegatronsSampler) {
  for (int rank = 0; rank < 3; ++rank) {
    LoaderOptions o;
    o.batch_size = 4;
    o.rank = rank;
    o.world_size = 3;
    auto plan = PlanTokenRun(100, 24, o);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->info.batches, 6);  // (100 - 24) / 12
    EXPECT_EQ(plan->info.dropped_samples, 4);
    for (int64_t b = 0; b < plan->info.batches; ++b)
      for (int s = 0; s < 4; ++s) EXPECT_EQ(plan->At(b * 4 + s).global, uint64_t(24 + b * 12 + rank * 4 + s));
  }
  LoaderOptions o;
  EXPECT_FALSE(PlanTokenRun(10, 11, o).ok());
}

}  // namespace
}  // namespace stoker
