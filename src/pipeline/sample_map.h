// pipeline/sample_map.h — the user's own per-sample function, as a stage of
// the decode threads.
//
// A SampleMap runs right after a sample's fields were decoded into its batch
// slot (SampleDecoder::Decode), on the same thread, in both the indexed and
// the stream run, so it sees exactly what the decoders wrote and its failures
// are the sample's (named, or skipped and refilled under on_error="skip").
// The engine knows nothing of what runs inside: the Python binding
// (src/python/map_binding.cc) calls a Python function holding the GIL only for
// that call; a C++ user may implement it directly.
//
// What a map returns that is not a fixed-shape array of the batch layout is
// its own business: it keeps such values per (buffer, slot) and hands them
// out with the batch (Python: lists), so the layout stays fixed-size.
// Thread-safety: Apply and CopySlot are called from several decode threads at
// once, for distinct slots.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/status.h"
#include "pipeline/batch_layout.h"

namespace stoker {

// Which sample the map is given, for its messages and its inputs.
struct MapContext {
  const BatchLayout& layout;  // the fields to read from the slot; the map's own arrays too, once probed
  const std::string& shard;   // the shard or file (webdataset's __url__)
  std::string_view key;       // the sample's key in it (webdataset's __key__)
};

// A fixed-shape array a map adds to each sample, learned from the probe.
struct MapArray {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
};

class SampleMap {
 public:
  virtual ~SampleMap() = default;

  // Once, when the loader is made: the probe sample is decoded into slot 0 of
  // `buffer` laid out as ctx.layout (batch size 1); the map runs on it and
  // says which new fixed-shape arrays its outputs need in every batch. Every
  // later sample is checked against what the probe returned.
  virtual Result<std::vector<MapArray>> Probe(const MapContext& ctx, uint8_t* buffer, uint64_t sample_seed) = 0;

  // The sample in `slot` of `batch_buffer` (laid out as ctx.layout, with the
  // probe's arrays): runs the map and writes its outputs into the slot.
  // `sample_seed` is the sample's own seed (pipeline/mix_seed.h MixSeed of
  // seed, epoch, sample), the same on any thread count and after a resume.
  virtual Status Apply(const MapContext& ctx, uint8_t* batch_buffer, int slot, uint64_t sample_seed) = 0;

  // Stream mode's skip policy repeats slot `from` in slot `to` of the same
  // batch (pipeline/stream_skips.h): the map's own values follow the arrays.
  virtual void CopySlot(const BatchLayout& layout, const uint8_t* batch_buffer, int from, int to) {
    (void)layout;
    (void)batch_buffer;
    (void)from;
    (void)to;
  }
};

}  // namespace stoker
