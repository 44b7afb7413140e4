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

// Stand-ins until the manifest branch lands (taken from it at the merge).
bool IsManifestPath(const std::string& source) {
  const std::string path = source.substr(0, source.find('?'));
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
}

Result<DatasetManifest> ReadManifest(const std::string& path_or_url, const IoOptions&) {
  return FailedPrecondition("reading " + path_or_url + ": manifests are not read yet");
}

}  // namespace stoker
