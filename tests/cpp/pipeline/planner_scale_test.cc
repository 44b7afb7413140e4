// tests/cpp/pipeline/planner_scale_test.cc — the planner at LAION scale,
// counts only and no data (issue 31): 400M samples in 41,000 shards of
// uneven sizes, 64 ranks, batch 256, three orders: the local default shuffle
// (single samples over the whole dataset), and windows of 16 shards
// (shuffle_window 16) of single samples or of blocks of 16. A rank's plan is
// computed, not stored, so its first 1,000 batches cost O(shards) memory
// (plus, for windowed blocks, the block tables of the few windows read) and
// no pass over the 400M samples; the contracts hold at that size: exactly
// once (sampled), every sample on one rank under the exact partition, and a
// resume from the middle of the epoch (same world size or another) continues
// the uninterrupted run.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/random.h"
#include "pipeline/elastic.h"
#include "pipeline/planner.h"

namespace stoker {
namespace {

constexpr uint64_t kSamples = 400'000'000;
constexpr uint32_t kShards = 41'000;
constexpr int kRanks = 64;
constexpr int kBatch = 256;
constexpr int64_t kBatches = 1000;

// 41,000 shard sizes from 0.5x to 1.5x the mean (~9,756), summing to exactly 400M.
const std::vector<uint32_t>& Counts() {
  static const std::vector<uint32_t> counts = [] {
    SplitMix64 rng(31);
    std::vector<uint64_t> w(kShards);
    uint64_t sum = 0;
    for (uint64_t& x : w) sum += x = 5000 + rng.Below(10000);
    std::vector<uint32_t> c(kShards);
    uint64_t total = 0;
    for (uint32_t s = 0; s < kShards; ++s) total += c[s] = static_cast<uint32_t>(w[s] * kSamples / sum);
    for (uint32_t s = 0; total < kSamples; ++s, ++total) ++c[s];
    return c;
  }();
  return counts;
}

// The order under test: shuffle_window and shuffle_block.
struct Order {
  int window;
  int block;
};

class PlannerScaleTest : public ::testing::TestWithParam<Order> {};

LoaderOptions Opts(int rank, int world = kRanks, PartitionPolicy partition = PartitionPolicy::kDropRemainder) {
  LoaderOptions o;
  o.shuffle = true;
  o.shuffle_window = PlannerScaleTest::GetParam().window;
  o.shuffle_block = PlannerScaleTest::GetParam().block;
  o.seed = 2026;
  o.batch_size = kBatch;
  o.rank = rank;
  o.world_size = world;
  o.partition = partition;
  o.drop_last = partition != PartitionPolicy::kExact;
  return o;
}

int64_t PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST_P(PlannerScaleTest, ARanksFirstThousandBatchesCostLittleTimeAndMemory) {
  const std::vector<uint32_t>& counts = Counts();
  for (int rank : {0, 37, kRanks - 1}) {
    const int64_t peak_before = PeakRssKb();
    const size_t heap_before = mallinfo2().uordblks;
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = PlanEpoch(counts, Opts(rank), 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_GE(plan->info.batches, kBatches);
    uint64_t checksum = 0;
    for (int64_t i = 0; i < kBatches * kBatch; ++i) {
      const SampleRef r = plan->At(i);
      ASSERT_LT(r.sample, counts[r.shard]);
      checksum += r.global;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double heap_mb = (static_cast<double>(mallinfo2().uordblks) - static_cast<double>(heap_before)) / 1e6;
    const double peak_mb = static_cast<double>(PeakRssKb() - peak_before) / 1e3;
    std::printf("window %d, block %d, rank %d: 1000 batches of 256 planned in %.3f s, heap +%.2f MB, peak RSS +%.2f MB (checksum %llu)\n",
                GetParam().window, GetParam().block, rank, seconds, heap_mb, peak_mb, static_cast<unsigned long long>(checksum));
    // Measured ~0.05 s and 0.3 MB of heap for the whole-dataset order,
    // ~0.05 s and 0.8-1.4 MB windowed (the README's "under 0.1 s and 1.5 MB").
    // The heap is counted, not timed: its bound is near the claim. The time bound
    // leaves a loaded 2-core machine (and the sanitizer builds) 20x; a plan
    // that walked the 400M samples would take tens of seconds and 6 GB.
    EXPECT_LT(seconds, 1.0);
    EXPECT_LT(heap_mb, 2.0);
    EXPECT_LT(peak_mb, 16.0);
  }
}

TEST_P(PlannerScaleTest, RandomPositionsMapBackToDistinctSamples) {
  const std::vector<uint32_t>& counts = Counts();
  auto order = EpochOrder::Make(counts, Opts(0), 3);
  ASSERT_TRUE(order.ok());
  ASSERT_EQ((*order)->size(), kSamples);
  SplitMix64 rng(7);
  std::vector<uint64_t> positions(1'000'000);
  for (uint64_t& p : positions) p = rng.Below(kSamples);
  // Asked in position order, as a rank's readers ask: the windowed block
  // order builds each window's table once, not once per position.
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<uint64_t> samples;
  samples.reserve(positions.size());
  std::vector<uint64_t> first(kShards + 1, 0);
  for (uint32_t s = 0; s < kShards; ++s) first[s + 1] = first[s] + counts[s];
  for (uint64_t p : positions) {
    const SampleRef r = (*order)->At(p);
    ASSERT_LT(r.global, kSamples);
    ASSERT_LT(r.sample, counts[r.shard]);
    ASSERT_EQ(first[r.shard] + r.sample, r.global) << "the shard lookup agrees with the dataset index";
    samples.push_back(r.global);
  }
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(std::unique(samples.begin(), samples.end()) - samples.begin(), static_cast<long>(positions.size()))
      << "distinct positions, distinct samples";
}

TEST_P(PlannerScaleTest, ExactPartitionSplitsTheOrderAmongEveryRank) {
  const std::vector<uint32_t>& counts = Counts();
  uint64_t sum = 0, expected_next = 0;
  int64_t batches = -1;
  for (int rank = 0; rank < kRanks; ++rank) {
    auto plan = PlanEpoch(counts, Opts(rank, kRanks, PartitionPolicy::kExact), 1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    if (batches >= 0) {
      ASSERT_EQ(plan->info.batches, batches) << "equal batches per rank";
    }
    batches = plan->info.batches;
    sum += static_cast<uint64_t>(plan->info.rank_samples);
    // Parts are contiguous and in rank order: this rank starts where the last ended.
    ASSERT_EQ(plan->OrderPosition(0), expected_next);
    expected_next = plan->OrderPosition(plan->info.rank_samples - 1) + 1;
  }
  EXPECT_EQ(sum, kSamples);
  EXPECT_EQ(expected_next, kSamples);
}

TEST_P(PlannerScaleTest, ResumeFromTheMiddleContinuesTheUninterruptedRun) {
  const std::vector<uint32_t>& counts = Counts();
  const int rank = 5;
  auto whole = PlanEpoch(counts, Opts(rank), 2);
  ASSERT_TRUE(whole.ok());
  const int64_t middle = whole->info.batches / 2;
  // Same world size: the rest of this rank's part, position for position.
  auto rest = PlanRemaining(counts, Opts(rank), 2, {{kRanks, middle}});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  ASSERT_EQ(rest->info.batches, whole->info.batches - middle);
  for (int64_t i = 0; i < kBatches * kBatch; ++i) {
    ASSERT_EQ(rest->At(i).global, whole->At(middle * kBatch + i).global) << "position " << i;
  }
  // Another world size (48 ranks): the samples the 64 ranks had still to
  // deliver, each on one new rank (up to 47 dropped to equalize them, and
  // each rank's partial last batch), starting where old rank 0 stopped.
  uint64_t delivered = 0, dropped = 0, still_to_come = 0;
  for (int r = 0; r < kRanks; ++r) {
    auto old = PlanEpoch(counts, Opts(r), 2);
    ASSERT_TRUE(old.ok());
    still_to_come += static_cast<uint64_t>(old->info.rank_samples - middle * kBatch);
    if (r == 0) {
      auto p = PlanRemaining(counts, Opts(0, 48), 2, {{kRanks, middle}});
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      EXPECT_EQ(p->At(0).global, old->At(middle * kBatch).global);
    }
  }
  for (int r = 0; r < 48; ++r) {
    auto p = PlanRemaining(counts, Opts(r, 48), 2, {{kRanks, middle}});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    delivered += static_cast<uint64_t>(p->info.rank_samples);
    dropped = static_cast<uint64_t>(p->info.dropped_samples);
  }
  EXPECT_EQ(delivered + dropped, still_to_come);
  EXPECT_LT(dropped, 48u * kBatch);
}

INSTANTIATE_TEST_SUITE_P(Orders, PlannerScaleTest,
                         ::testing::Values(Order{0, 1}, Order{16, 1}, Order{16, 16}),
                         [](const ::testing::TestParamInfo<Order>& info) {
                           return info.param.window == 0 ? std::string("WholeDataset")
                                                         : "Window" + std::to_string(info.param.window) + "Block" +
                                                               std::to_string(info.param.block);
                         });

}  // namespace
}  // namespace stoker
