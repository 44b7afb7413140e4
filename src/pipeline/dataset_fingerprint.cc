// pipeline/dataset_fingerprint.cc — see dataset_fingerprint.h.
#include "pipeline/dataset_fingerprint.h"

#include <cinttypes>
#include <cstdio>

#include "io/url.h"

namespace stoker {

std::string DatasetFingerprint(const Dataset& data) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const ShardSummary& shard : data.indexes->summaries()) {
    const std::string path = SplitQuery(shard.path).path;  // a signed URL's query changes; the shard does not
    const size_t slash = path.find_last_of('/');
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    mix(base.data(), base.size() + 1);
    const uint64_t words[2] = {shard.bytes, shard.samples};
    mix(words, sizeof words);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

}  // namespace stoker
