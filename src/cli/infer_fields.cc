// cli/infer_fields.cc — guessing fields from the first sample (see header).
// Thread-safety: free functions.
#include "cli/infer_fields.h"

#include <cctype>

#include "codecs/image_format.h"
#include "core/file.h"
#include "formats/parquet_file.h"
#include "formats/sample_index.h"
#include "io/reader.h"

namespace stoker::cli {
namespace {

bool IsInteger(const std::vector<uint8_t>& b) {
  size_t i = 0, n = b.size();
  while (i < n && std::isspace(b[i])) ++i;
  while (n > i && std::isspace(b[n - 1])) --n;
  if (i < n && (b[i] == '-' || b[i] == '+')) ++i;
  if (i == n || n - i > 18) return false;
  for (; i < n; ++i)
    if (!std::isdigit(b[i])) return false;
  return true;
}

}  // namespace

Result<std::vector<std::string>> InferFields(const std::string& shard, KeyRule rule) {
  STOKER_ASSIGN_OR_RETURN(ShardIndex index, LoadOrBuildShardIndex(shard, rule));
  if (index.samples.empty()) return InvalidArgument(shard + " holds no samples to infer fields from");
  const SampleEntry s = index.samples.front().ToEntry();
  // Through the reader: member offsets of a .tar.gz are in its uncompressed bytes.
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> file, OpenReader(shard, DefaultIoOptions()));
  std::vector<std::string> out;
  for (const MemberRef& m : s.members) {
    if (m.field.ends_with(".npy") || m.field == "npy") {
      out.push_back(m.field + ":npy");
      continue;
    }
    if (m.field.ends_with(".npz") || m.field == "npz") {
      out.push_back(m.field + ":npz");
      continue;
    }
    if (m.size > (uint64_t{256} << 20)) continue;
    std::vector<uint8_t> head(std::min<uint64_t>(m.size, 32));
    STOKER_RETURN_IF_ERROR(file->PRead(m.offset, head));
    if (SniffImageFormat(head) != ImageFormat::kUnknown) {
      out.push_back(m.field + ":image:224");
      continue;
    }
    if (m.size <= 20) {
      std::vector<uint8_t> text(m.size);
      STOKER_RETURN_IF_ERROR(file->PRead(m.offset, text));
      if (IsInteger(text)) out.push_back(m.field + ":scalar");
    }
  }
  return out;
}

Result<std::vector<std::string>> InferParquetFields(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(ShardIndex index, LoadParquetIndex(path, DefaultIoOptions()));
  STOKER_ASSIGN_OR_RETURN(ParquetSummary summary, DescribeParquet(index));
  std::vector<std::string> out;
  for (const ParquetColumnInfo& c : summary.columns) {
    if (c.suggested == "image") out.push_back(c.name + ":image:224");
    else if (c.suggested == "raw") out.push_back(c.name + ":bytes:1048576");
    else if (!c.suggested.empty()) out.push_back(c.name + ":" + c.suggested);
  }
  return out;
}

std::string FieldFlags(const std::vector<std::string>& fields) {
  std::string s;
  for (const std::string& f : fields) s += (s.empty() ? "-f " : " -f ") + f;
  return s;
}

}  // namespace stoker::cli
