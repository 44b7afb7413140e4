// pipeline/sample_keys.cc — see sample_keys.h.
#include "pipeline/sample_keys.h"

#include "formats/parquet_file.h"

namespace stoker {

std::string InternalKey(const std::string& shard, SampleView entry) { return shard + ":" + std::string(entry.key); }

Result<std::string> UserKey(const LoaderOptions& options, const std::string& shard, SampleView entry,
                            std::span<const uint8_t> bytes) {
  if (!IsParquetPath(shard)) return std::string(entry.key);
  if (options.key_column.empty()) return InternalKey(shard, entry);
  std::optional<MemberView> member = entry.FindExact(entry.members.MemberFieldFor(options.key_column));
  if (!member) {
    return NotFound(shard + ": row " + std::string(entry.key) + " has no key column '" + options.key_column + "'");
  }
  const std::span<const uint8_t> value = member->data(bytes);
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

}  // namespace stoker
