// pipeline/index_shuffle.h — a keyed permutation of [0, n), evaluated one
// index at a time: the shuffle of an epoch without a list of its samples.
//
// A Feistel network over the smallest power of two >= n, with cycle walking
// (Black & Rogaway, "Ciphers with arbitrary finite domains", 2002; the
// construction of format-preserving encryption, and of Grain's and
// TensorFlow's index_shuffle): each round is a bijection of the 2^bits
// domain whatever its round function, so the network is one; an index that
// lands at n or above is encrypted again until it lands below n, which keeps
// the walk on the index's own cycle and so gives a bijection of [0, n). As
// 2^bits < 2n, a walk takes under two steps on average.
// The halves are unequal when bits is odd (bits/2 and bits - bits/2 bits,
// alternating sides each round), so the domain is never more than 2n.
// Eight rounds with a splitmix64 finalizer as round function: four rounds
// of a random function already give a pseudorandom permutation
// (Luby-Rackoff); the rest is margin for the unequal halves and small n.
// O(1) memory, about 40 ns an index. Same (n, seed), same permutation on
// every machine.
// Thread-safety: an immutable value.
#pragma once

#include <array>
#include <cstdint>

namespace stoker {

class IndexShuffle {
 public:
  IndexShuffle() = default;  // the identity of [0, 1)
  // n >= 1.
  IndexShuffle(uint64_t n, uint64_t seed);

  uint64_t size() const { return n_; }

  // The image of i (i < size()): a distinct index in [0, size()) for each i.
  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do x = Encrypt(x);
    while (x >= n_);
    return x;
  }

 private:
  static constexpr int kRounds = 8;
  uint64_t Encrypt(uint64_t x) const;

  uint64_t n_ = 1;
  int bits_ = 0;
  std::array<uint64_t, kRounds> keys_{};
};

}  // namespace stoker
