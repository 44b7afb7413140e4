// megatron's indices in C++: numpy's legacy shuffle stream (values taken from
// numpy 2.x), the split string, the blending index and the sample index shape.
// The full equality with megatron-core runs in tests/python/test_tokens.py.
#include "pipeline/gpt_indices.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/numpy_random.h"

namespace stoker {
namespace {

std::vector<int64_t> Shuffled(int64_t n, uint32_t seed) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  NumpyRandomState rng(seed);
  rng.Shuffle(std::span<int64_t>(v));
  v.resize(std::min<int64_t>(n, 10));
  return v;
}

TEST(NumpyRandomState, ShuffleMatchesNumpy) {
  // numpy.random.RandomState(seed).shuffle(numpy.arange(n))[:10]
  EXPECT_EQ(Shuffled(10, 0), (std::vector<int64_t>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
  EXPECT_EQ(Shuffled(17, 1234), (std::vector<int64_t>{14, 11, 0, 13, 16, 2, 10, 7, 1, 9}));
  EXPECT_EQ(Shuffled(1000, 42), (std::vector<int64_t>{521, 737, 740, 660, 411, 678, 626, 513, 859, 136}));
}

TEST(GptIndices, SplitRange) {
  auto r = SplitRange("969,30,1", 0, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::pair<int64_t, int64_t>{0, 969}));
  EXPECT_EQ(*SplitRange("969,30,1", 1, 1000), (std::pair<int64_t, int64_t>{969, 999}));
  EXPECT_EQ(*SplitRange("969,30,1", 2, 1000), (std::pair<int64_t, int64_t>{999, 1000}));
  EXPECT_EQ(*SplitRange("100,0,0", 1, 1000), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_FALSE(SplitRange("", 0, 10).ok());
}

TEST(GptIndices, BlendFollowsWeights) {
  std::vector<int16_t> di;
  std::vector<int64_t> dsi;
  std::vector<double> w = {0.5, 0.3, 0.2};
  BuildBlendingIndices(w, 1000, &di, &dsi);
  std::vector<int64_t> count(3, 0);
  for (size_t i = 0; i < di.size(); ++i) {
    EXPECT_EQ(dsi[i], count[di[i]]);
    count[di[i]]++;
  }
  EXPECT_EQ(count, (std::vector<int64_t>{500, 300, 200}));
}

TEST(GptIndices, BlendDatasetIndexAloneIsTheSame) {
  std::vector<int16_t> with, alone;
  std::vector<int64_t> dsi;
  std::vector<double> w = {0.2, 0.3, 0.5};
  BuildBlendingIndices(w, 777, &with, &dsi);
  BuildBlendingIndices(w, 777, &alone, nullptr);
  EXPECT_EQ(alone, with);
}

TEST(GptIndices, SampleIndexCoversTheTokens) {
  std::vector<int32_t> lengths = {100, 7, 300, 55, 1, 250};
  GptIndexOptions o;
  o.seq_len = 64;
  o.num_samples = 30;  // > one epoch of 713 tokens: 3 epochs
  o.seed = 7;
  auto g = BuildGptIndices(lengths, 0, 6, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_epochs, 3);
  EXPECT_EQ(g->document_index.size(), 18u);
  EXPECT_GE(g->size(), 30);
  std::vector<int64_t> sorted = g->shuffle_index;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < g->size(); ++i) EXPECT_EQ(sorted[i], i);
}

}  // namespace
}  // namespace stoker
