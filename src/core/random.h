// core/random.h — SplitMix64, the one PRNG behind every seeded choice in
// stoker (epoch shuffles, random crops and flips).
//
// Why our own: std:: engines are portable but std:: distributions and
// std::shuffle are not (their output differs between standard libraries), and
// a plan or a crop must be the same on every machine for a given seed.
// SplitMix64 (Steele, Lea, Flood 2014; the generator Vigna uses to seed
// xoshiro) is one add and two multiply-xorshifts per draw, well mixed, and
// any 64-bit seed is a good one.
// Two integer mappings, both kept because existing outputs depend on them:
// RandInt (modulo, the random-crop offsets) and Below (multiply-high, the
// planner's shuffles). Changing either changes every seeded result.
// Thread-safety: a value; each owner draws from its own copy.
#pragma once

#include <cstdint>

namespace stoker {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits (every double it returns is a
  // multiple of 2^-53).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi) (up to rounding of lo + (hi - lo) * u).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // Uniform integer in [lo, hi], inclusive; requires hi >= lo. By modulo: the
  // bias is below span / 2^64, irrelevant for image-sized spans.
  int64_t RandInt(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(Next() % span);
  }

  // Uniform in [0, n) for n >= 1, by the high half of a 128-bit product
  // (Lemire's map without the rejection step): no division, and the bias is
  // below n / 2^64, nothing worth caring about at n < 2^32.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace stoker
