// tests/fuzz/sample_index_fuzz.cc — the sidecar index (`<shard>.idx`, JSON)
// reader on any bytes: every accepted entry must lie inside the shard; and
// the hand parser of the writer's own form (ParseWrittenShardIndex) accepts
// only documents nlohmann's parser reads as the same samples.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/sample_index.h"
#include "fuzz_input.h"

namespace {

// The hand parser's index against nlohmann's parse of the same text.
void CheckWritten(std::string_view text, const stoker::ShardIndex& index) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != "stoker-index") __builtin_trap();
  const nlohmann::json& samples = doc["samples"];
  if (doc["shard_size"].get<uint64_t>() != index.shard_size || samples.size() != index.samples.size()) {
    __builtin_trap();
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const stoker::SampleView s = index.samples[i];
    const nlohmann::json& want = samples[i];
    if (want[0].get<std::string>() != s.key || want[1].get<uint64_t>() != s.begin ||
        want[2].get<uint64_t>() != s.end || want[3].size() != s.members.size()) {
      __builtin_trap();
    }
    for (size_t m = 0; m < s.members.size(); ++m) {
      const stoker::MemberView got = s.members[m];
      if (want[3][m][0].get<std::string>() != got.field || want[3][m][1].get<std::string>() != got.name() ||
          want[3][m][2].get<uint64_t>() != got.offset || want[3][m][3].get<uint64_t>() != got.size) {
        __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (stoker::ShardIndex written; stoker::ParseWrittenShardIndex(text, &written)) CheckWritten(text, written);
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
