// pipeline/stream_order.cc — see stream_order.h.
#include "pipeline/stream_order.h"

#include <numeric>
#include <utility>

#include "core/random.h"
#include "pipeline/mix_seed.h"

namespace stoker {

std::vector<uint32_t> StreamPassShards(uint64_t seed, uint64_t pass, uint32_t num_shards, int rank, int world,
                                       bool shuffle) {
  std::vector<uint32_t> order(num_shards);
  std::iota(order.begin(), order.end(), 0u);
  if (shuffle) {
    SplitMix64 rng(MixSeed(seed, pass, 0x5354524541ull));  // "STREA": apart from the indexed planner's streams
    for (uint32_t i = num_shards; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  std::vector<uint32_t> mine;
  for (uint32_t i = static_cast<uint32_t>(rank); i < num_shards; i += static_cast<uint32_t>(world)) {
    mine.push_back(order[i]);
  }
  return mine;
}

}  // namespace stoker
