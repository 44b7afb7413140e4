// pipeline/index_shuffle.cc — see index_shuffle.h.
#include "pipeline/index_shuffle.h"

#include "core/random.h"

namespace stoker {

namespace {

// splitmix64's finalizer: a bijection of 64-bit words with full avalanche.
inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t Mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

}  // namespace

IndexShuffle::IndexShuffle(uint64_t n, uint64_t seed) : n_(n == 0 ? 1 : n) {
  while (bits_ < 64 && (uint64_t{1} << bits_) < n_) ++bits_;
  SplitMix64 rng(seed);
  for (uint64_t& k : keys_) k = rng.Next();
}

uint64_t IndexShuffle::Encrypt(uint64_t x) const {
  // x = (left : lb bits, right : rb bits). A round maps (L, R) to
  // (R, L ^ F(R)): the sides swap widths, and it is undone by
  // L = R' ^ F(L'), so it is a bijection of the domain.
  int rb = bits_ / 2, lb = bits_ - rb;
  uint64_t left = x >> rb, right = x & Mask(rb);
  for (const uint64_t key : keys_) {
    const uint64_t t = left ^ (Mix(right ^ key) & Mask(lb));
    left = right;
    right = t;
    const int w = lb;
    lb = rb;
    rb = w;
  }
  return (left << rb) | right;
}

}  // namespace stoker
