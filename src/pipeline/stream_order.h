// pipeline/stream_order.h — which shards a rank reads in stream mode, pass by
// pass (webdataset's shard shuffle and split by node). Pass p over the data
// permutes the shard list with (seed, p) when shuffling (else keeps it as
// given); rank r of W reads shards r, r + W, ... of that list, each front to
// back, then goes on into pass p + 1. A pure function: the stream depends on
// its arguments only, never on threads or timing.
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <vector>

namespace stoker {

// The indices of the shards rank `rank` of `world` reads in pass `pass`, in order.
std::vector<uint32_t> StreamPassShards(uint64_t seed, uint64_t pass, uint32_t num_shards, int rank, int world,
                                       bool shuffle);

}  // namespace stoker
