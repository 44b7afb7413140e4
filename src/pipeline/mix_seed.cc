// pipeline/mix_seed.cc — see mix_seed.h.
#include "pipeline/mix_seed.h"

#include "core/random.h"

namespace stoker {

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  // Chained, not XORed into one seed: each word is mixed into the hash of the
  // words before it, so nearby (seed, epoch) pairs give unrelated streams.
  const uint64_t h = SplitMix64(a).Next();
  const uint64_t h2 = SplitMix64(h ^ b).Next();
  return SplitMix64(h2 ^ c).Next();
}

}  // namespace stoker
