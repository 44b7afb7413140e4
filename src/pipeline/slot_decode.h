// pipeline/slot_decode.h — one sample decoded into its slot of a batch in
// flight, the same for every order source's decoders (epoch_run.h's,
// stream_run.h's): its fields through the thread's SampleDecoder, with the
// batch's GPU slots staging their images for GPU decode (gpu_decode.h),
// then its __index__, key and url; the decode (and the user's map inside
// it) recorded as the stage's counters and spans.
// Thread-safety: the calling decoder thread owns the slot (and the decoder).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "formats/sample_index.h"
#include "pipeline/batch_in_flight.h"
#include "pipeline/dataset.h"
#include "pipeline/direct_arrays.h"
#include "pipeline/sample_decoder.h"
#include "stoker/status.h"

namespace stoker {

// What the order source knows of the sample.
struct SlotSample {
  const std::string& shard;  // as given (data.shards)
  SampleView entry;
  std::span<uint8_t> bytes;             // its [entry.begin, entry.end), or its members' data when packed
  std::span<const DirectRange> direct;  // placed in their slots by the reader (direct_arrays.h)
  uint64_t seed = 0;                    // its augmentation seed (mix_seed.h)
  int64_t global = 0;                   // its __index__
};

// Decodes `sample` into `slot` of `batch`, recorded as thread `thread`'s
// decode span of batch `span_batch` (its number within the epoch). Returns
// the decode's error, else the key's (include_keys); the slot is the
// caller's to count done.
Status DecodeIntoSlot(SampleDecoder& decoder, const EngineData& data, BatchInFlight& batch, int slot,
                      const SlotSample& sample, uint32_t thread, int64_t span_batch);

}  // namespace stoker
