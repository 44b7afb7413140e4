// pipeline/map_probe.cc — see map_probe.h.
#include "pipeline/map_probe.h"

#include "pipeline/sample_decoder.h"

namespace stoker {

Status ProbeSampleMap(SampleMap& map, const std::vector<FieldSpec>& fields, SampleView entry,
                      std::span<const uint8_t> probe, const std::string& where, uint64_t sample_seed,
                      BatchLayout* layout) {
  // The probe decoded as any sample is, into a one-sample buffer of its own.
  STOKER_ASSIGN_OR_RETURN(BatchLayout one, MakeBatchLayout(fields, 1, entry, probe, where));
  std::vector<uint8_t> bytes(probe.begin(), probe.end());  // Decode may write back detoured ranges: none here
  std::vector<uint8_t> buffer(one.buffer_bytes);
  SampleDecoder decoder(&one);  // without the map: Probe runs it
  STOKER_RETURN_IF_ERROR(decoder.Decode(where, entry, bytes, buffer.data(), 0, sample_seed));
  const MapContext ctx{one, where, entry.key};
  Result<std::vector<MapArray>> arrays = map.Probe(ctx, buffer.data(), sample_seed);
  if (!arrays.ok()) {
    return arrays.status().WithContext(where + ": sample '" + std::string(entry.key) + "' (the first, which " +
                                       "teaches the map's outputs)");
  }
  std::vector<ArraySlot> extra;
  for (MapArray& a : *arrays) {
    ArraySlot slot;
    slot.name = std::move(a.name);
    slot.dtype = a.dtype;
    slot.sample_shape = std::move(a.shape);
    extra.push_back(std::move(slot));
  }
  return AppendArrays(*layout, std::move(extra));
}

}  // namespace stoker
