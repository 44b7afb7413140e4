// pipeline/slot_decode.cc — see slot_decode.h.
#include "pipeline/slot_decode.h"

#include <cstring>

#include "observe/clock.h"
#include "pipeline/sample_keys.h"

namespace stoker {

Status DecodeIntoSlot(SampleDecoder& decoder, const EngineData& data, BatchInFlight& batch, int slot,
                      const SlotSample& sample, uint32_t thread, int64_t span_batch) {
  Recorder* rec = data.recorder;
  uint8_t* base = batch.lease->data();
  const GpuSlot gpu{data.gpu.get(), slot >= batch.gpu_from, &batch.gpu};
  const uint64_t begin = NowNs();
  if (rec) rec->decodes_in_flight++;
  Status st = decoder.Decode(sample.shard, sample.entry, sample.bytes, base, slot, sample.seed, sample.direct,
                             data.gpu ? &gpu : nullptr);
  if (rec) {
    const uint64_t end = NowNs();
    rec->decodes_in_flight--;
    rec->decode.Add(sample.bytes.size(), end - begin);
    rec->AddSpan({SpanKind::kDecode, thread, begin, end, span_batch, slot});
    if (decoder.map_end_ns() != 0) {  // the user's map, a stage inside the decode span
      rec->map.Add(0, decoder.map_end_ns() - decoder.map_begin_ns());
      rec->AddSpan({SpanKind::kMap, thread, decoder.map_begin_ns(), decoder.map_end_ns(), span_batch, slot});
    }
  }
  const ArraySlot& index = data.layout.arrays[data.layout.index_array];
  std::memcpy(index.At(base, slot), &sample.global, sizeof(sample.global));
  if (!batch.keys.empty()) {
    Result<std::string> key = UserKey(data.options, sample.shard, sample.entry, sample.bytes);
    if (key.ok()) {
      batch.keys[static_cast<size_t>(slot)] = std::move(key.value());
    } else if (st.ok()) {
      st = key.status();
    }
    batch.urls[static_cast<size_t>(slot)] = sample.shard;
  }
  return st;
}

}  // namespace stoker
