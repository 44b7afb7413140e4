// tests/cpp/pipeline/index_shuffle_test.cc — the keyed bijection behind the
// shuffled epoch order (index_shuffle.h, epoch_order.h): a permutation of
// [0, n) for every n, fixed by its seed, and as well mixed as a uniform
// random permutation by the measures a training order cares about (where
// each sample lands, how far it moves, which samples share a batch again).
#include "pipeline/index_shuffle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipeline/epoch_order.h"
#include "pipeline/mix_seed.h"

namespace stoker {
namespace {

std::vector<uint64_t> Image(const IndexShuffle& f) {
  std::vector<uint64_t> v(f.size());
  for (uint64_t i = 0; i < f.size(); ++i) v[i] = f(i);
  return v;
}

TEST(IndexShuffleTest, IsAPermutationOfEveryDomain) {
  std::vector<uint64_t> sizes;
  for (uint64_t n = 1; n <= 300; ++n) sizes.push_back(n);
  for (uint64_t n : {1023ull, 1024ull, 1025ull, 65537ull, 1000003ull}) sizes.push_back(n);
  for (uint64_t n : sizes) {
    for (uint64_t seed : {0ull, 1ull, 0xDEADBEEFull}) {
      std::vector<uint64_t> v = Image(IndexShuffle(n, seed));
      std::sort(v.begin(), v.end());
      for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i) << "n " << n << " seed " << seed;
    }
  }
}

TEST(IndexShuffleTest, FixedBySeed) {
  EXPECT_EQ(Image(IndexShuffle(1000, 5)), Image(IndexShuffle(1000, 5)));
  EXPECT_NE(Image(IndexShuffle(1000, 5)), Image(IndexShuffle(1000, 6)));
  // Pinned: an epoch's order must be the same on every machine and build
  // (a checkpoint resumes it elsewhere); a change here changes every order.
  EXPECT_EQ(Image(IndexShuffle(10, 42)), (std::vector<uint64_t>{2, 9, 1, 5, 3, 7, 0, 4, 8, 6}));
  const IndexShuffle big(1000003, 7);
  EXPECT_EQ((std::vector<uint64_t>{big(0), big(1), big(2), big(3)}),
            (std::vector<uint64_t>{249276, 700794, 188551, 898263}));
}

TEST(IndexShuffleTest, EveryPlaceIsEquallyLikely) {
  // n = 10 over 20,000 seeds: each (index, image) cell expects 2,000 hits
  // (binomial sd ~42); a biased network (too few rounds, a weak round
  // function) shows cells far off. Bound: 15% (7 sd).
  const uint64_t n = 10, seeds = 20000;
  std::vector<int> hits(n * n, 0);
  for (uint64_t s = 0; s < seeds; ++s) {
    const IndexShuffle f(n, MixSeed(s, 1));
    for (uint64_t i = 0; i < n; ++i) ++hits[i * n + f(i)];
  }
  const double want = static_cast<double>(seeds) / n;
  for (uint64_t c = 0; c < n * n; ++c) EXPECT_NEAR(hits[c], want, 0.15 * want) << "index " << c / n << " -> " << c % n;
}

TEST(IndexShuffleTest, MovesSamplesAsFarAsAUniformPermutation) {
  // A uniform permutation moves an index by n/3 on average and sends
  // neighbours i, i+1 n/3 apart; fixed points: 1 expected.
  const uint64_t n = 200003;
  const IndexShuffle f(n, 99);
  double moved = 0, apart = 0;
  uint64_t fixed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t y = f(i);
    moved += std::fabs(static_cast<double>(y) - static_cast<double>(i));
    if (i + 1 < n) apart += std::fabs(static_cast<double>(f(i + 1)) - static_cast<double>(y));
    fixed += y == i;
  }
  EXPECT_NEAR(moved / n / (n / 3.0), 1.0, 0.02);
  EXPECT_NEAR(apart / (n - 1) / (n / 3.0), 1.0, 0.02);
  EXPECT_LT(fixed, 10u);
}

TEST(IndexShuffleTest, BatchesDoNotMeetAgainNextEpoch) {
  // bench/remote.py's "pairs_again": of the pairs of samples sharing a batch
  // in epoch e, the fraction sharing one again in epoch e + 1. A uniform
  // permutation: (batch - 1) / (N - 1) = 2.05% for V's 3,072 samples in
  // batches of 64.
  const std::vector<uint32_t> counts(12, 256);
  LoaderOptions o;
  o.shuffle = true;
  o.seed = 3;
  const uint64_t batch = 64;
  double fraction = 0;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    auto a = EpochOrder::Make(counts, o, epoch), b = EpochOrder::Make(counts, o, epoch + 1);
    ASSERT_TRUE(a.ok() && b.ok());
    const uint64_t n = (*a)->size();
    std::vector<uint64_t> batch_b(n);
    for (uint64_t p = 0; p < n; ++p) batch_b[(*b)->At(p).global] = p / batch;
    uint64_t same = 0, pairs = 0;
    for (uint64_t start = 0; start < n; start += batch) {
      for (uint64_t i = start; i < start + batch; ++i)
        for (uint64_t j = i + 1; j < start + batch; ++j) {
          same += batch_b[(*a)->At(i).global] == batch_b[(*a)->At(j).global];
          ++pairs;
        }
    }
    fraction += static_cast<double>(same) / pairs / 4;
  }
  EXPECT_NEAR(fraction, 63.0 / 3071, 0.005);
}

}  // namespace
}  // namespace stoker
