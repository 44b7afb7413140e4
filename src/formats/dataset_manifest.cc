// formats/dataset_manifest.cc — see dataset_manifest.h.
#include "formats/dataset_manifest.h"

#include <algorithm>

namespace stoker {

ShardSummary SummaryOf(const ShardIndex& index) {
  ShardSummary s;
  s.path = index.shard_path;
  s.bytes = index.shard_size;
  s.samples = static_cast<uint32_t>(index.samples.size());
  for (SampleView v : index.samples) {
    s.sample_bytes += v.end - v.begin;
    s.max_sample_bytes = std::max<uint64_t>(s.max_sample_bytes, v.end - v.begin);
  }
  return s;
}

}  // namespace stoker
