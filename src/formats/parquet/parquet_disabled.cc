// formats/parquet/parquet_disabled.cc — Parquet in a build without Apache
// Arrow (CMake found no pyarrow): every Parquet source fails at once, saying
// how to get a build that reads it, instead of the build failing for users
// who never read Parquet.
#include <algorithm>
#include <cctype>

#include "formats/parquet_file.h"

namespace stoker {

class ParquetFooter {};
struct ParquetRows::Group {};

namespace {
Status Disabled(const std::string& path) {
  return FailedPrecondition(path + ": this stoker was built without Apache Arrow, so it cannot read Parquet; "
                            "install pyarrow (pip install pyarrow==26.0.1) and rebuild stoker "
                            "(pip install --no-build-isolation .)");
}
}  // namespace

bool IsParquetPath(std::string_view path) {
  if (path.size() < 8) return false;
  std::string tail(path.substr(path.size() - 8));
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".parquet";
}

bool ParquetSupported() { return false; }

Result<ShardIndex> LoadParquetIndex(const std::string& path, const IoOptions&) { return Disabled(path); }
int ParquetShuffleBlock(const std::vector<ShardIndex>&) { return 2; }
uint64_t ParquetMaxRowGroupBytes(const ShardIndex&) { return 0; }
Result<ParquetSummary> DescribeParquet(const ShardIndex& index) { return Disabled(index.shard_path); }

ParquetRows::ParquetRows(std::vector<std::string> columns, size_t max_groups, IoOptions io)
    : columns_(std::move(columns)), io_(std::move(io)), max_groups_(max_groups) {}
ParquetRows::~ParquetRows() = default;
uint64_t ParquetRows::decodes() const { return 0; }
void ParquetRows::SetMaxGroups(size_t) {}
Status ParquetRows::Read(const ShardIndex& shard, const RandomAccessReader&, uint32_t, RowBytes*, SampleEntry*) {
  return Disabled(shard.shard_path);
}

}  // namespace stoker
