// pipeline/mix_seed.h — MixSeed, the one derivation of every seed from the
// loader's: shuffles (the epoch order, stream passes, mixtures) and each
// sample's augmentation seed (decoders, refills, the user's map).
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

namespace stoker {

// A 64-bit mix of its arguments (splitmix64); seeds of shuffles and of
// per-sample augmentation derive from it.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace stoker
