// tests/fuzz/sample_index_fuzz.cc — the sidecar index (`<shard>.idx`, JSON)
// reader on any bytes: every accepted entry must lie inside the shard.
#include <cstdint>

#include "formats/sample_index.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stoker::fuzz::MemFile mem(data, size);
  stoker::Result<stoker::ShardIndex> index = stoker::ReadShardIndex(mem.path());
  if (!index.ok()) return 0;
  for (const stoker::SampleView s : index->samples) {
    if (s.begin > s.end || s.end > index->shard_size) __builtin_trap();
    for (const stoker::MemberView m : s.members) {
      if (m.offset < s.begin || m.offset + m.size > s.end) __builtin_trap();
    }
  }
  return 0;
}
