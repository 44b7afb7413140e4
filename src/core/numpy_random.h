// core/numpy_random.h — numpy's legacy `RandomState(seed).shuffle`, bit for bit.
//
// RandomState(int seed) seeds MT19937 with init_genrand(seed) (numpy's
// mt19937_seed), which is exactly std::mt19937(seed): the standard fixes both
// the seeding and the output, so every standard library agrees. shuffle() on
// a 1-D array is Fisher-Yates from the end, j = random_interval(i): the
// smallest all-ones mask >= i, then masked 32-bit draws (64-bit when i does
// not fit 32 bits) rejected until <= i (numpy/random/src/distributions).
// megatron-core shuffles its document and sample indices this way, so
// matching its sample order means matching this stream.
// Thread-safety: an instance belongs to one thread.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace stoker {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t NextU32() { return static_cast<uint32_t>(mt_()); }
  uint64_t NextU64() {
    const uint64_t hi = NextU32();
    return (hi << 32) | NextU32();
  }

  // random_interval(max): uniform in [0, max].
  uint64_t Interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t value;
    if (max <= 0xffffffffULL) {
      while ((value = (NextU32() & mask)) > max) {
      }
    } else {
      while ((value = (NextU64() & mask)) > max) {
      }
    }
    return value;
  }

  template <typename T>
  void Shuffle(std::span<T> x) {
    for (size_t i = x.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(Interval(i - 1));
      std::swap(x[i - 1], x[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace stoker
