// tests/cpp/pipeline/shard_index_cache_test.cc — tables loaded when first
// wanted, kept within their bound, leased past being dropped, and checked
// against the summary the plan was made from.
#include "pipeline/shard_index_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace stoker {
namespace {

// Shard s holds s + 2 samples of 10 bytes each.
ShardIndex Table(uint32_t s, uint32_t samples) {
  ShardIndex index;
  index.shard_path = "/data/shard-" + std::to_string(s) + ".tar";
  index.shard_size = 10'240;
  for (uint32_t i = 0; i < samples; ++i) {
    index.samples.push_back({"k" + std::to_string(i), {{"cls", "k.cls", 512ull * i + 512, 10}}, 512ull * i,
                             512ull * i + 522});
  }
  return index;
}

std::vector<ShardSummary> Summaries(uint32_t shards) {
  std::vector<ShardSummary> out;
  for (uint32_t s = 0; s < shards; ++s) out.push_back(SummaryOf(Table(s, s + 2)));
  return out;
}

struct Counted {
  std::atomic<int> loads{0};
  std::atomic<int> delay_ms{0};
  ShardIndexCache::Load Loader() {
    return [this](uint32_t, const ShardSummary& shard) -> Result<ShardIndex> {
      ++loads;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
      const uint32_t s = static_cast<uint32_t>(std::stoul(shard.path.substr(shard.path.rfind('-') + 1)));
      return Table(s, s + 2);
    };
  }
};

TEST(ShardIndexCache, LoadsATableWhenFirstWantedAndKeepsItWithoutABound) {
  Counted c;
  ShardIndexCache cache(Summaries(4), c.Loader(), 0);
  for (int round = 0; round < 3; ++round) {
    for (uint32_t s = 0; s < 4; ++s) {
      auto t = cache.Get(s);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ((*t)->samples.size(), s + 2);
    }
  }
  EXPECT_EQ(c.loads, 4);
  EXPECT_EQ(cache.loads(), 4u);
}

TEST(ShardIndexCache, PastItsBoundTheLeastRecentlyUsedIsDroppedAndLoadedAgain) {
  Counted c;
  auto bytes = [](uint32_t s) { return Table(s, s + 2).samples.MemoryBytes() + Table(s, s + 2).shard_path.size(); };
  // Room for tables 0 and 2 together, not for a third.
  ShardIndexCache cache(Summaries(4), c.Loader(), bytes(0) + bytes(2));
  ASSERT_TRUE(cache.Get(0).ok());
  ASSERT_TRUE(cache.Get(1).ok());
  ASSERT_TRUE(cache.Get(0).ok());  // 0 is now the most recent
  ASSERT_TRUE(cache.Get(2).ok());  // drops 1
  EXPECT_EQ(c.loads, 3);
  EXPECT_LE(cache.held_bytes(), cache.max_bytes());
  ASSERT_TRUE(cache.Get(0).ok());  // still held
  EXPECT_EQ(c.loads, 3);
  ASSERT_TRUE(cache.Get(1).ok());  // loaded again
  EXPECT_EQ(c.loads, 4);
  cache.SetMaxBytes(0);  // from now on nothing is dropped
  for (uint32_t s = 0; s < 4; ++s) ASSERT_TRUE(cache.Get(s).ok());
  const int after = c.loads;
  for (uint32_t s = 0; s < 4; ++s) ASSERT_TRUE(cache.Get(s).ok());
  EXPECT_EQ(c.loads, after);
}

TEST(ShardIndexCache, ALeasedTableOutlivesBeingDropped) {
  Counted c;
  ShardIndexCache cache(Summaries(3), c.Loader(), 1);  // one table at a time
  auto t0 = cache.Get(0);
  ASSERT_TRUE(t0.ok());
  std::shared_ptr<const ShardIndex> lease = *t0;
  ASSERT_TRUE(cache.Get(1).ok());
  ASSERT_TRUE(cache.Get(2).ok());
  EXPECT_EQ(lease->samples.size(), 2u);
  EXPECT_EQ(lease->samples[1].key, "k1");
  EXPECT_EQ(lease->samples[1].members[0].offset, 1024u);
}

TEST(ShardIndexCache, OneLoadPerShardHoweverManyWantIt) {
  Counted c;
  c.delay_ms = 30;
  ShardIndexCache cache(Summaries(2), c.Loader(), 0);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { ok += cache.Get(1).ok(); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(c.loads, 1);
}

TEST(ShardIndexCache, HeldNeitherLoadsNorWaits) {
  Counted c;
  ShardIndexCache cache(Summaries(2), c.Loader(), 0);
  EXPECT_FALSE(cache.Held(1));
  EXPECT_EQ(c.loads, 0);
  ASSERT_TRUE(cache.Get(1).ok());
  EXPECT_TRUE(cache.Held(1));
  EXPECT_FALSE(cache.Held(0));
}

TEST(ShardIndexCache, ATableThatDisagreesWithThePlanIsAnErrorNamingTheShard) {
  std::vector<ShardSummary> shards = Summaries(2);
  ShardIndexCache cache(shards, [](uint32_t, const ShardSummary& s) -> Result<ShardIndex> {
    ShardIndex t = Table(1, 7);  // 7 samples where the plan counted 3
    t.shard_path = s.path;
    return t;
  }, 0);
  auto t = cache.Get(1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find("/data/shard-1.tar changed since the loader planned"), std::string::npos)
      << t.status().ToString();
  EXPECT_NE(t.status().message().find("3 samples"), std::string::npos);
}

TEST(ShardIndexCache, AFailedLoadIsReturnedAndTriedAgainNextTime) {
  std::atomic<int> calls{0};
  ShardIndexCache cache(Summaries(1), [&](uint32_t, const ShardSummary& s) -> Result<ShardIndex> {
    if (calls++ == 0) return IoError(s.path + ": connection reset");
    return Table(0, 2);
  }, 0);
  EXPECT_EQ(cache.Get(0).status().code(), StatusCode::kIoError);
  EXPECT_TRUE(cache.Get(0).ok());
}

}  // namespace
}  // namespace stoker
