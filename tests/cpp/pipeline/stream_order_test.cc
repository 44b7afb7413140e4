// Stream mode's order: each pass's shards split among ranks exactly once, and
// the shuffle buffer's draws (pipeline/stream_order.h, pipeline/shuffle_buffer.h).
#include "pipeline/stream_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "pipeline/shuffle_buffer.h"

namespace stoker {
namespace {

TEST(StreamOrderTest, EachPassGivesEveryShardToExactlyOneRank) {
  for (uint64_t pass = 0; pass < 4; ++pass) {
    std::vector<uint32_t> all;
    for (int rank = 0; rank < 3; ++rank) {
      std::vector<uint32_t> mine = StreamPassShards(9, pass, 10, rank, 3, /*shuffle=*/true);
      EXPECT_EQ(mine.size(), rank == 0 ? 4u : 3u);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<uint32_t> want(10);
    std::iota(want.begin(), want.end(), 0u);
    EXPECT_EQ(all, want) << "pass " << pass;
  }
}

TEST(StreamOrderTest, PassesArePermutedBySeedAndPassAndUnshuffledKeepsTheList) {
  EXPECT_EQ(StreamPassShards(1, 0, 50, 0, 1, true), StreamPassShards(1, 0, 50, 0, 1, true));
  EXPECT_NE(StreamPassShards(1, 0, 50, 0, 1, true), StreamPassShards(1, 1, 50, 0, 1, true));
  EXPECT_NE(StreamPassShards(1, 0, 50, 0, 1, true), StreamPassShards(2, 0, 50, 0, 1, true));
  EXPECT_EQ(StreamPassShards(1, 3, 5, 1, 2, false), (std::vector<uint32_t>{1, 3}));
}

std::vector<int> Shuffled(size_t capacity, uint64_t seed, int n) {
  ShuffleBuffer<int> buffer(capacity, seed);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if (std::optional<int> x = buffer.Push(i)) out.push_back(*x);
  }
  while (std::optional<int> x = buffer.Drain()) out.push_back(*x);
  return out;
}

TEST(ShuffleBufferTest, LetsEverySampleOutOnceAndIsSeeded) {
  std::vector<int> a = Shuffled(16, 5, 200);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> want(200);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want);
  EXPECT_NE(a, want);
  EXPECT_EQ(a, Shuffled(16, 5, 200));
  EXPECT_NE(a, Shuffled(16, 6, 200));
  // Bounded: the i-th sample out was drawn from the first i + 16 in.
  for (size_t i = 0; i + 16 < a.size(); ++i) EXPECT_LT(a[i], static_cast<int>(i) + 16);
}

// webdataset's ramp (its _shuffle with initial=100): the first sample out
// after 100 in, then one out for every two in until 1,000 are held, then one
// for one; a pass that begins again (Reseed) ramps again.
TEST(ShuffleBufferTest, RampsFromOneHundredHeldToCapacity) {
  ShuffleBuffer<int> buffer(1000, 7);
  for (int pass = 0; pass < 2; ++pass) {
    buffer.Reseed(static_cast<uint64_t>(pass));
    size_t held = 0, out = 0;
    std::vector<size_t> held_at_out;
    for (int i = 0; i < 3000; ++i) {
      ++held;
      if (buffer.Push(i)) {
        --held;
        ++out;
        held_at_out.push_back(held + 1);
      }
    }
    ASSERT_FALSE(held_at_out.empty());
    EXPECT_EQ(held_at_out.front(), 100u) << "pass " << pass;  // the first out once 100 are held
    EXPECT_EQ(held_at_out[1], 101u);                          // then the buffer grows by one per out
    EXPECT_EQ(held_at_out[899], 999u);
    EXPECT_EQ(held_at_out[900], 1000u);                       // full: one for one from here
    EXPECT_EQ(held_at_out.back(), 1000u);
    EXPECT_EQ(held, 999u);  // a full buffer lets one out as each sample comes in
    EXPECT_EQ(out, 2001u);
    while (buffer.Drain()) --held;
    EXPECT_EQ(held, 0u);
  }
}

TEST(ShuffleBufferTest, CapacityOneIsStreamOrder) {
  std::vector<int> want(50);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(Shuffled(1, 3, 50), want);
}

}  // namespace
}  // namespace stoker
