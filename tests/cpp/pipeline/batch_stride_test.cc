// One worker's share of a rank's batches (pipeline/batch_stride.h): for
// strides 1..4, worker j's batch k holds exactly the order positions of the
// rank's batch j + k * stride, so the workers' batches taken in b order are
// the rank's plan, under every partition policy, with short and empty last
// batches, and after an elastic resume.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "pipeline/batch_stride.h"
#include "pipeline/elastic.h"

namespace stoker {
namespace {

LoaderOptions Opts(PartitionPolicy partition, bool drop_last, int world, int rank, int bs) {
  LoaderOptions o;
  o.partition = partition;
  o.drop_last = drop_last;
  o.world_size = world;
  o.rank = rank;
  o.batch_size = bs;
  o.shuffle = true;
  o.seed = 5;
  return o;
}

// Batch b of a plan as order positions (plans keep no list: computed per position).
std::vector<uint64_t> BatchPositions(const EpochPlan& p, int bs, int64_t b) {
  std::vector<uint64_t> v;
  for (int64_t i = b * bs; i < std::min<int64_t>(p.info.rank_samples, (b + 1) * bs); ++i) {
    v.push_back(p.OrderPosition(i));
  }
  return v;
}

// The workers' batches, taken from worker b % stride in b order, are the plan's.
void ExpectUnionIsPlan(const EpochPlan& whole, int bs, const std::string& what) {
  for (int stride = 1; stride <= 4; ++stride) {
    std::vector<EpochPlan> workers;
    int64_t batches = 0, samples = 0;
    for (int j = 0; j < stride; ++j) {
      Result<EpochPlan> w = StrideBatches(whole, bs, stride, j);
      ASSERT_TRUE(w.ok()) << what << ": " << w.status().message();
      // Worker j makes the rank's batches j, j + stride, ...: ceil((B - j) / stride) of them.
      EXPECT_EQ(w->info.batches, std::max<int64_t>(0, (whole.info.batches - j + stride - 1) / stride)) << what;
      batches += w->info.batches;
      samples += w->info.rank_samples;
      workers.push_back(std::move(w).value());
    }
    EXPECT_EQ(batches, whole.info.batches) << what << " stride " << stride;
    EXPECT_EQ(samples, whole.info.rank_samples) << what << " stride " << stride;
    for (int64_t b = 0; b < whole.info.batches; ++b) {
      EXPECT_EQ(BatchPositions(workers[b % stride], bs, b / stride), BatchPositions(whole, bs, b))
          << what << " stride " << stride << " batch " << b;
    }
  }
  // Unequal shares of a cycle (the trainer beside its Ray workers): worker j
  // holds shares[j] consecutive places of each cycle of sum(shares) batches.
  for (const std::vector<int>& shares : {std::vector<int>{2, 1}, {1, 3, 2}, {3}}) {
    int cycle = 0;
    for (int s : shares) cycle += s;
    std::vector<EpochPlan> workers;
    std::vector<int> offsets;
    int64_t batches = 0;
    for (int s : shares) {
      offsets.push_back(offsets.empty() ? 0 : offsets.back() + shares[offsets.size() - 1]);
      Result<EpochPlan> w = StrideBatches(whole, bs, cycle, offsets.back(), s);
      ASSERT_TRUE(w.ok()) << what << ": " << w.status().message();
      batches += w->info.batches;
      workers.push_back(std::move(w).value());
    }
    EXPECT_EQ(batches, whole.info.batches) << what << " cycle " << cycle;
    for (int64_t b = 0; b < whole.info.batches; ++b) {
      const int place = static_cast<int>(b % cycle);
      size_t j = 0;
      while (place >= offsets[j] + shares[j]) ++j;
      const int64_t k = b / cycle * shares[j] + (place - offsets[j]);  // worker j's own batch index
      EXPECT_EQ(BatchPositions(workers[j], bs, k), BatchPositions(whole, bs, b))
          << what << " cycle " << cycle << " worker " << j << " batch " << b;
    }
  }
}

TEST(BatchStrideTest, WorkersBatchesInOrderAreTheRanksPlanForEveryPartition) {
  const std::vector<uint32_t> counts = {23, 0, 41, 17, 30};  // 111 samples, an empty shard
  struct Case {
    PartitionPolicy partition;
    bool drop_last;
    const char* name;
  };
  const Case cases[] = {{PartitionPolicy::kDropRemainder, true, "drop"},
                        {PartitionPolicy::kDropRemainder, false, "drop, short last batch"},
                        {PartitionPolicy::kPadRepeat, false, "pad"},
                        {PartitionPolicy::kPadRepeat, true, "pad, drop_last"},
                        {PartitionPolicy::kExact, false, "exact"}};
  for (const Case& c : cases) {
    for (int world : {1, 2, 3, 4}) {
      for (int rank = 0; rank < world; ++rank) {
        for (int bs : {1, 4, 7}) {
          Result<EpochPlan> whole = PlanEpoch(counts, Opts(c.partition, c.drop_last, world, rank, bs), 2);
          ASSERT_TRUE(whole.ok()) << whole.status().message();
          ExpectUnionIsPlan(*whole, bs,
                            std::string(c.name) + ", rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                ", batch " + std::to_string(bs));
        }
      }
    }
  }
}

TEST(BatchStrideTest, ExactPartitionsEmptyLastBatchGoesToItsWorker) {
  // 12 samples on 5 ranks in batches of 1: parts of 3, 3, 2, 2, 2 samples,
  // 3 batches each, so ranks 2..4 end in an empty batch.
  Result<EpochPlan> whole = PlanEpoch({12}, Opts(PartitionPolicy::kExact, false, 5, 3, 1), 0);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->info.batches, 3);
  ASSERT_EQ(whole->info.rank_samples, 2);
  Result<EpochPlan> last = StrideBatches(*whole, 1, 3, 2);  // the rank's batch 2, its empty one
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->info.batches, 1);
  EXPECT_EQ(last->info.rank_samples, 0);
  ExpectUnionIsPlan(*whole, 1, "exact, empty last batch");
}

TEST(BatchStrideTest, ElasticRemainderIsStridedToo) {
  const std::vector<uint32_t> counts = {50, 70, 40, 80};
  for (int rank = 0; rank < 3; ++rank) {
    Result<EpochPlan> rest =
        PlanRemaining(counts, Opts(PartitionPolicy::kDropRemainder, true, 3, rank, 5), 1, {{4, 3}, {2, 4}});
    ASSERT_TRUE(rest.ok()) << rest.status().message();
    ASSERT_GT(rest->spans.size(), 1u);  // pieces of several old ranks' parts
    ExpectUnionIsPlan(*rest, 5, "elastic rank " + std::to_string(rank));
  }
}

TEST(BatchStrideTest, StrideOneIsThePlanAndBadArgumentsAreRefused) {
  Result<EpochPlan> whole = PlanEpoch({30, 30}, Opts(PartitionPolicy::kDropRemainder, true, 1, 0, 8), 0);
  ASSERT_TRUE(whole.ok());
  Result<EpochPlan> same = StrideBatches(*whole, 8, 1, 0);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->info.batches, whole->info.batches);
  EXPECT_EQ(same->spans.size(), whole->spans.size());
  for (auto [stride, offset, share] :
       {std::tuple{0, 0, 1}, {2, 2, 1}, {2, -1, 1}, {1, 1, 1}, {3, 1, 3}, {3, 0, -1}}) {
    Result<EpochPlan> bad = StrideBatches(*whole, 8, stride, offset, share);
    ASSERT_FALSE(bad.ok()) << stride << " " << offset << " " << share;
    EXPECT_NE(bad.status().message().find("batch_"), std::string::npos) << bad.status().message();
  }
  // Share 0: none of the batches (a loader that receives the others').
  Result<EpochPlan> none = StrideBatches(*whole, 8, 1, 0, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->info.batches, 0);
  EXPECT_EQ(none->info.rank_samples, 0);
  EXPECT_TRUE(none->spans.empty());
  Result<EpochPlan> tokens = PlanTokenRun(1000, 0, Opts(PartitionPolicy::kDropRemainder, true, 1, 0, 8));
  ASSERT_TRUE(tokens.ok());
  Result<EpochPlan> refused = StrideBatches(*tokens, 8, 2, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("token"), std::string::npos);
}

// Without a shuffle the order is the dataset's, so a worker's spans are
// easy to read: worker 1 of 2 in batches of 4 over 16 samples holds 4..7 and 12..15.
TEST(BatchStrideTest, AWorkersPlanIsSpansOfTheGlobalOrder) {
  LoaderOptions o = Opts(PartitionPolicy::kDropRemainder, true, 1, 0, 4);
  o.shuffle = false;
  Result<EpochPlan> whole = PlanEpoch({16}, o, 0);
  ASSERT_TRUE(whole.ok());
  Result<EpochPlan> w = StrideBatches(*whole, 4, 2, 1);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->spans.size(), 2u);
  EXPECT_EQ(w->spans[0].first, 4u);
  EXPECT_EQ(w->spans[0].count, 4u);
  EXPECT_EQ(w->spans[1].first, 12u);
  EXPECT_EQ(w->spans[1].count, 4u);
  EXPECT_EQ(w->At(5).global, 13u);
}

}  // namespace
}  // namespace stoker
