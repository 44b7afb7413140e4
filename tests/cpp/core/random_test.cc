// tests/cpp/core/random_test.cc — SplitMix64 against the reference
// splitmix64.c (Vigna) and the ranges each mapping promises.
#include "core/random.h"

#include <gtest/gtest.h>

#include <set>

namespace stoker {
namespace {

TEST(SplitMix64Test, SeedZeroMatchesReferenceSplitmix64) {
  // First outputs of splitmix64.c with x = 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.Next(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.Next(), 0x06C45D188009454FULL);
  EXPECT_EQ(rng.Next(), 0xF88BB8A8724C81ECULL);
}

TEST(SplitMix64Test, MappingsAreDefinedOnNext) {
  // Each mapping is a fixed function of one Next(): the sequences users
  // rely on (crop offsets, shuffles) must not change.
  SplitMix64 a(42), b(42), c(42), d(42);
  const uint64_t x = a.Next();
  EXPECT_EQ(b.Uniform(), static_cast<double>(x >> 11) * 0x1.0p-53);
  EXPECT_EQ(c.RandInt(10, 19), 10 + static_cast<int64_t>(x % 10));
  EXPECT_EQ(d.Below(1000), static_cast<uint64_t>((static_cast<unsigned __int128>(x) * 1000) >> 64));
}

TEST(SplitMix64Test, RangesHold) {
  SplitMix64 rng(7);
  std::set<int64_t> ints;
  std::set<uint64_t> below;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    const double v = rng.Uniform(-2.5, 4.0);
    EXPECT_GE(v, -2.5);
    EXPECT_LT(v, 4.0);
    const int64_t r = rng.RandInt(-3, 3);
    EXPECT_GE(r, -3);
    EXPECT_LE(r, 3);
    ints.insert(r);
    const uint64_t b = rng.Below(5);
    EXPECT_LT(b, 5u);
    below.insert(b);
    EXPECT_EQ(rng.RandInt(9, 9), 9);
    EXPECT_EQ(rng.Below(1), 0u);
  }
  EXPECT_EQ(ints.size(), 7u);  // both ends reached: inclusive
  EXPECT_EQ(below.size(), 5u);
}

TEST(SplitMix64Test, SameSeedSameSequence) {
  SplitMix64 a(123456789), b(123456789), c(123456790);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace stoker
