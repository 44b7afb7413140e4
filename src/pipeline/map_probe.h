// pipeline/map_probe.h — a user map's outputs learned from the probe sample:
// the sample is decoded as any is (sample_decoder.h), the map run on it
// (sample_map.h), and the arrays it returns get their slots in the layout.
// Apart from sample_map.h, which the decoder includes to run the map, so
// neither includes the other.
// Thread-safety: a free function (the map's Probe is called on this thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/sample_index.h"
#include "pipeline/batch_layout.h"
#include "pipeline/sample_map.h"

namespace stoker {

// Runs `map` on the probe sample (as MakeBatchLayout was given it) and adds
// the arrays it asks for to `layout`, re-laid out. Errors name `where` and
// the sample's key.
Status ProbeSampleMap(SampleMap& map, const std::vector<FieldSpec>& fields, SampleView entry,
                      std::span<const uint8_t> probe, const std::string& where, uint64_t sample_seed,
                      BatchLayout* layout);

}  // namespace stoker
