// tests/cpp/pipeline/read_runs_test.cc — which samples one read covers.
#include "pipeline/read_runs.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

// Two shards; shard 0: samples of 100 bytes at 0, 100, 200, then one after a
// gap past kMaxCoalesceGap; shard 1: two samples.
std::vector<ShardIndex> Indexes() {
  std::vector<ShardIndex> ix(2);
  ix[0].shard_path = "http://host/a.tar";
  for (uint64_t b : {0ull, 100ull, 200ull}) ix[0].samples.push_back({"k", {}, b, b + 100});
  ix[0].samples.push_back({"far", {}, 300 + kMaxCoalesceGap + 1, 400 + kMaxCoalesceGap + 1});
  ix[1].shard_path = "/local/b.tar";
  ix[1].samples.push_back({"x", {}, 0, 50});
  ix[1].samples.push_back({"y", {}, 60, 120});  // a 10-byte gap: a member no field reads
  return ix;
}

// A plan whose order is the given (shard, sample) list, over Indexes()'s shards.
EpochPlan Plan(std::vector<std::pair<uint32_t, uint32_t>> order) {
  std::vector<SampleRef> refs;
  for (auto [shard, sample] : order) refs.push_back({shard, sample, 0});
  EpochPlan p;
  p.info.rank_samples = static_cast<int64_t>(refs.size());
  p.spans = {{0, refs.size()}};
  p.span_start = {0};
  p.order = EpochOrder::Listed({4, 2}, std::move(refs));
  return p;
}

TEST(ReadRuns, NeighboursInOneShardAreOneRun) {
  auto ix = ShardIndexCache::Holding(Indexes());
  EpochPlan p = Plan({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}});
  EXPECT_EQ(RunLength(p, *ix, 0, 6, 1 << 20), 3);  // the gap before "far" ends it
  EXPECT_EQ(RunLength(p, *ix, 3, 3, 1 << 20), 1);  // the shard changes after "far"
  EXPECT_EQ(RunLength(p, *ix, 4, 2, 1 << 20), 2);  // a small gap is read through
}

TEST(ReadRuns, TheBatchTheLimitAndTheOrderBoundARun) {
  auto ix = ShardIndexCache::Holding(Indexes());
  EpochPlan p = Plan({{0, 0}, {0, 1}, {0, 2}});
  EXPECT_EQ(RunLength(p, *ix, 0, 2, 1 << 20), 2);  // n: the batch's remaining slots
  EXPECT_EQ(RunLength(p, *ix, 0, 3, 200), 2);      // 300 bytes would pass the limit
  EXPECT_EQ(RunLength(p, *ix, 0, 3, 0), 1);        // off
  EpochPlan back = Plan({{0, 1}, {0, 0}});
  EXPECT_EQ(RunLength(back, *ix, 0, 2, 1 << 20), 1);  // backwards: two reads
}

TEST(ReadRuns, ScatteredSlotsReadByShardAndSample) {
  // A mixture's batch: shard 0's neighbours in slots 3, 0, 5 (out of slot
  // order), shard 1's in slots 1 and 4, shard 0's far sample in slot 2.
  auto ix = ShardIndexCache::Holding(Indexes());
  std::vector<SampleRef> refs = {{0, 1, 0}, {1, 1, 0}, {0, 3, 0}, {0, 0, 0}, {1, 0, 0}, {0, 2, 0}};
  auto remote = [&](uint32_t) { return uint64_t{1} << 20; };
  EXPECT_EQ(ScatteredRuns(refs, *ix, remote), (std::vector<std::vector<int>>{{3, 0, 5}, {2}, {4, 1}}));
  // The limit cuts as RunLength does; limit 0: a read per slot, in file order.
  auto small = [&](uint32_t) { return uint64_t{200}; };
  EXPECT_EQ(ScatteredRuns(refs, *ix, small), (std::vector<std::vector<int>>{{3, 0}, {5}, {2}, {4, 1}}));
  auto off = [&](uint32_t) { return uint64_t{0}; };
  EXPECT_EQ(ScatteredRuns(refs, *ix, off), (std::vector<std::vector<int>>{{3}, {0}, {5}, {2}, {4}, {1}}));
  // The same sample twice (a source smaller than the batch wraps into its
  // next pass): two reads, never one range read backwards.
  std::vector<SampleRef> twice = {{1, 0, 0}, {1, 0, 0}};
  EXPECT_EQ(ScatteredRuns(twice, *ix, remote), (std::vector<std::vector<int>>{{0}, {1}}));
}

TEST(ReadRuns, ScatteredSlotsOfAShardNotYetIndexedGoAsOneGroup) {
  // Its offsets are unknown until the reader loads them: one group per
  // shard, in sample order, for the reader to cut with RunLengthOf.
  std::vector<ShardIndex> tables = Indexes();
  std::vector<ShardSummary> summaries;
  for (const ShardIndex& t : tables) summaries.push_back(SummaryOf(t));
  auto load = [&](uint32_t shard, const ShardSummary&) -> Result<ShardIndex> { return tables[shard]; };
  ShardIndexCache ix(summaries, load, 0);
  std::vector<SampleRef> refs = {{0, 2, 0}, {0, 0, 0}, {0, 1, 0}};
  auto limit = [](uint32_t) { return uint64_t{1} << 20; };
  ASSERT_FALSE(ix.Held(0));
  const auto runs = ScatteredRuns(refs, ix, limit);
  EXPECT_EQ(runs, (std::vector<std::vector<int>>{{1, 2, 0}}));
  EXPECT_EQ(ix.loads(), 0u);  // the scheduler waits on no load
  EXPECT_EQ(RunLengthOf([&](int k) { return refs[runs[0][k]]; }, ix, 3, 1 << 20), 3);
  EXPECT_TRUE(ix.Held(0));
}

TEST(ReadRuns, AutoCoalescesRemoteShardsOnly) {
  LoaderOptions o;
  EXPECT_EQ(CoalesceLimit(o, "http://host/a.tar"), kRemoteCoalesceBytes);
  EXPECT_EQ(CoalesceLimit(o, "s3://bucket/a.tar"), kRemoteCoalesceBytes);
  EXPECT_EQ(CoalesceLimit(o, "/data/a.tar"), 0u);
  o.coalesce_bytes = 4096;
  EXPECT_EQ(CoalesceLimit(o, "/data/a.tar"), 4096u);
  o.coalesce_bytes = 0;
  EXPECT_EQ(CoalesceLimit(o, "http://host/a.tar"), 0u);
}

TEST(ReadRuns, ReadAheadIsIoDepthForRemoteShardsWithinItsBytes) {
  LoaderOptions o;
  o.io_depth = 8;
  EXPECT_EQ(ReadAheadBatches(o, "s3://b/a.tar", 4 << 20), 8);
  EXPECT_EQ(ReadAheadBatches(o, "s3://b/a.tar", 100ull << 20), 2);   // 256 MiB hold two such batches
  EXPECT_EQ(ReadAheadBatches(o, "s3://b/a.tar", 1ull << 30), 1);     // never below one
  EXPECT_EQ(ReadAheadBatches(o, "/data/a.tar", 4 << 20), 0);
  o.read_ahead_batches = 3;
  EXPECT_EQ(ReadAheadBatches(o, "/data/a.tar", 4 << 20), 3);
}

TEST(ReadRuns, ReadsPerBatchFollowTheOrder) {
  LoaderOptions o;
  o.batch_size = 64;
  EXPECT_EQ(ReadsPerBatch(o), 1);  // stream order
  o.shuffle = true;
  o.shuffle_block = 16;
  EXPECT_EQ(ReadsPerBatch(o), 5);  // ceil(64 / 16) + 1 blocks
  o.shuffle_buffer = 100;
  EXPECT_EQ(ReadsPerBatch(o), 1);  // a buffer streams
  o.shuffle_buffer = 0;
  o.shuffle_block = 1;
  EXPECT_EQ(ReadsPerBatch(o), 64);  // a global permutation: one per sample
  o.shuffle_block = 16;
  o.coalesce_bytes = 0;
  EXPECT_EQ(ReadsPerBatch(o), 64);  // coalescing off
}

TEST(ReadRuns, RemoteIoDepthKeepsEightBatchesOfReadsInFlight) {
  LoaderOptions o;
  o.batch_size = 64;
  EXPECT_EQ(RemoteIoDepth(o), 8);
  o.shuffle = true;
  o.shuffle_block = 16;
  EXPECT_EQ(RemoteIoDepth(o), 40);
  o.io_depth = RemoteIoDepth(o);
  EXPECT_EQ(ReadAheadBatches(o, "http://h/a.tar", 4 << 20), 8);  // 40 reads of 5 per batch
  o.shuffle_block = 1;
  EXPECT_EQ(RemoteIoDepth(o), kMaxRemoteIoDepth);
  o.io_depth = RemoteIoDepth(o);
  EXPECT_EQ(ReadAheadBatches(o, "http://h/a.tar", 4 << 20), 1);  // one batch holds 64 reads
}

}  // namespace
}  // namespace stoker
