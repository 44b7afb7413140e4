// tests/fuzz/dataset_manifest_fuzz.cc — the dataset manifest reader on any
// bytes: an accepted manifest's shards hold together (samples inside their
// shard, none larger than the largest) and its total is their sum.
#include <cstdint>

#include "formats/dataset_manifest.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stoker::fuzz::MemFile mem(data, size);
  stoker::Result<stoker::DatasetManifest> manifest = stoker::ReadManifest(mem.path());
  if (!manifest.ok()) return 0;
  uint64_t total = 0;
  for (const stoker::ShardSummary& s : manifest->shards) {
    if (s.path.empty() || s.sample_bytes > s.bytes || s.max_sample_bytes > s.sample_bytes) __builtin_trap();
    total += s.samples;
  }
  if (total != stoker::TotalSamples(*manifest)) __builtin_trap();
  return 0;
}
