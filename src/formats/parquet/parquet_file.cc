// formats/parquet/parquet_file.cc — Parquet files as shards, the engine's
// side: indexes, the decoded row group cache and rows laid out as members;
// Arrow's reading is the plugin's (formats/parquet/engine.h). See formats/parquet_file.h.
#include "formats/parquet_file.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "formats/npy.h"
#include "formats/parquet/engine.h"
#include "formats/parquet/plugin_loader.h"

namespace stoker {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// An image stored by path only (its struct's "bytes" null), as `datasets`
// writes an Image() column built from file paths: the file's bytes, as
// datasets' Image.decode_example reads them. A relative path is taken from
// the Parquet file's directory (or URL), never the working directory.
Status AppendImageFile(const std::string& parquet_path, std::string_view path, const IoOptions& io,
                       RowBytes* out) {
  const std::string resolved = ResolveFrom(parquet_path, std::string(path));
  auto context = [&] { return "image struct's 'bytes' is null and its 'path' '" + std::string(path) + "'"; };
  Result<std::unique_ptr<RandomAccessReader>> file = OpenReader(resolved, io);
  if (!file.ok()) return file.status().WithContext(context());
  const size_t at = out->size();
  out->resize(at + (*file)->Size());
  Status st = (*file)->PRead(0, {out->data() + at, out->size() - at});
  if (!st.ok()) out->resize(at);
  return st.ok() ? st : st.WithContext(context());
}

// Appends one value as its member's bytes (see the header's table of types).
Status AppendValue(const ParquetValue& value, const std::string& parquet_path, const IoOptions& io, RowBytes* out) {
  switch (value.kind) {
    case ParquetValue::Kind::kBytes:
      out->insert(out->end(), value.bytes.begin(), value.bytes.end());
      return Status::Ok();
    case ParquetValue::Kind::kImagePath:
      return AppendImageFile(parquet_path, value.bytes, io, out);
    case ParquetValue::Kind::kNumbers: {
      std::vector<uint8_t> npy = EncodeNpy(value.dtype, {value.count},
                                           {reinterpret_cast<const uint8_t*>(value.bytes.data()), value.bytes.size()});
      out->insert(out->end(), npy.begin(), npy.end());
      return Status::Ok();
    }
  }
  return Internal("unknown Parquet value kind");
}

}  // namespace

bool IsParquetPath(std::string_view path) {
  const size_t q = path.find_first_of("?#");  // a URL's query is not its name
  if (q != std::string_view::npos && (path.starts_with("http://") || path.starts_with("https://"))) {
    path = path.substr(0, q);
  }
  return path.size() >= 8 && Lower(path.substr(path.size() - 8)) == ".parquet";
}

bool ParquetSupported() { return !ParquetPluginMajors().empty(); }

Result<ShardIndex> LoadParquetIndex(const std::string& path, const IoOptions& io) {
  Result<const ParquetEngine*> engine = LoadParquetEngine();
  if (!engine.ok()) return engine.status().WithContext(path);
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> reader, OpenReader(path, io));
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ParquetFooter> footer, (*engine)->ReadFooter(path, *reader));
  ShardIndex index;
  index.shard_path = path;
  index.shard_size = reader->Size();
  index.samples.reserve(static_cast<size_t>(footer->rows()));
  uint64_t at = 0;  // the estimated byte position of the next row (see the header)
  for (int g = 0; g < footer->groups(); ++g) {
    const int64_t first = footer->group_first_row[static_cast<size_t>(g)];
    const int64_t rows = footer->group_first_row[static_cast<size_t>(g) + 1] - first;
    const uint64_t bytes = footer->group_bytes[static_cast<size_t>(g)];
    for (int64_t r = 0; r < rows; ++r) {
      SampleEntry e;
      e.key = std::to_string(first + r);
      e.begin = at + bytes * static_cast<uint64_t>(r) / static_cast<uint64_t>(rows);
      e.end = at + bytes * static_cast<uint64_t>(r + 1) / static_cast<uint64_t>(rows);
      index.samples.push_back(std::move(e));
    }
    at += bytes;
  }
  index.parquet = std::move(footer);
  return index;
}

int ParquetShuffleBlock(const std::vector<ShardIndex>& indexes) {
  std::map<int64_t, int64_t> sizes;  // rows of a row group -> how many groups have them
  for (const ShardIndex& index : indexes) {
    if (!index.parquet) continue;
    const std::vector<int64_t>& first = index.parquet->group_first_row;
    const size_t groups = index.parquet->group_bytes.size();
    for (size_t g = 0; g < groups; ++g) {
      if (g + 1 < groups || groups == 1) ++sizes[first[g + 1] - first[g]];
    }
  }
  int64_t best = 2, count = 0;
  for (const auto& [rows, n] : sizes) {  // ascending: a tie keeps the larger
    if (n >= count) best = rows, count = n;
  }
  return static_cast<int>(std::clamp<int64_t>(best, 2, int64_t{1} << 30));
}

uint64_t ParquetMaxRowGroupBytes(const ShardIndex& index) {
  return index.parquet ? index.parquet->max_group_uncompressed : 0;
}

Result<ParquetSummary> DescribeParquet(const ShardIndex& index) {
  if (!index.parquet) return InvalidArgument(index.shard_path + " is not a Parquet file");
  return index.parquet->summary;
}

ParquetRows::ParquetRows(std::vector<std::string> columns, size_t max_groups, IoOptions io)
    : columns_(std::move(columns)), io_(std::move(io)), max_groups_(std::max<size_t>(1, max_groups)) {}

ParquetRows::~ParquetRows() = default;

uint64_t ParquetRows::decodes() const {
  std::lock_guard lock(mu_);
  return decodes_;
}

void ParquetRows::SetMaxGroups(size_t max_groups) {
  std::lock_guard lock(mu_);
  max_groups_ = std::max<size_t>(1, max_groups);
}

namespace {

// The columns as `shard` names them: its source's (a mixture's FieldAliases), else `columns` itself.
const std::vector<std::string>& ColumnsOf(const ShardIndex& shard, const std::vector<std::string>& columns,
                                          std::vector<std::string>* renamed) {
  const FieldAliases* aliases = shard.samples.aliases().get();
  if (aliases == nullptr) return columns;
  renamed->clear();
  for (const std::string& c : columns) renamed->emplace_back(AliasedField(aliases, c));
  return *renamed;
}

}  // namespace

Result<std::shared_ptr<const ParquetGroup>> ParquetRows::GetGroup(const ShardIndex& shard,
                                                                  const RandomAccessReader& file, int group) {
  const ParquetFooter* footer = shard.parquet.get();
  std::list<Slot>::iterator slot;
  {
    std::unique_lock lock(mu_);
    while (true) {
      slot = std::find_if(slots_.begin(), slots_.end(),
                          [&](const Slot& s) { return s.file == footer && s.group == group; });
      if (slot == slots_.end() || !slot->loading) break;
      loaded_.wait(lock);  // another reader decodes it now
    }
    if (slot != slots_.end()) {
      slots_.splice(slots_.begin(), slots_, slot);  // most recently used
      return slot->data;
    }
    slots_.push_front(Slot{footer, group, nullptr, true});
    slot = slots_.begin();
    ++decodes_;
  }
  // Decoded outside the lock: other row groups load and hit meanwhile. The
  // engine is loaded: this shard's index came from it.
  Result<const ParquetEngine*> engine = LoadParquetEngine();
  std::vector<std::string> renamed;
  Result<std::shared_ptr<const ParquetGroup>> decoded =
      engine.ok() ? (*engine)->DecodeGroup(*footer, file, group, ColumnsOf(shard, columns_, &renamed))
                        : Result<std::shared_ptr<const ParquetGroup>>(engine.status());
  std::lock_guard lock(mu_);
  if (!decoded.ok()) {
    slots_.erase(slot);
    loaded_.notify_all();
    return decoded.status();
  }
  slot->data = *decoded;
  slot->loading = false;
  // Evict the least recently used decoded groups past the bound (a group a
  // reader still holds lives on in its shared_ptr until that read ends).
  size_t kept = 0;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (!it->loading && ++kept > max_groups_) {
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  loaded_.notify_all();
  return decoded;
}

Status ParquetRows::Read(const ShardIndex& shard, const RandomAccessReader& file, uint32_t row, RowBytes* bytes,
                         SampleEntry* entry) {
  if (!shard.parquet) return Internal(shard.shard_path + " read as Parquet but has no Parquet footer");
  const ParquetFooter& footer = *shard.parquet;
  const int group = footer.GroupOf(row);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ParquetGroup> decoded, GetGroup(shard, file, group));
  const int64_t in_group = static_cast<int64_t>(row) - footer.group_first_row[static_cast<size_t>(group)];
  entry->key = std::to_string(row);
  entry->members.clear();
  entry->aliases = shard.samples.aliases();
  entry->begin = bytes->size();
  std::string scratch;
  std::vector<std::string> renamed;
  const std::vector<std::string>& columns = ColumnsOf(shard, columns_, &renamed);
  for (size_t c = 0; c < columns.size(); ++c) {
    const size_t at = bytes->size();
    ParquetValue value;
    Status st = decoded->Value(c, in_group, &scratch, &value);
    if (st.ok()) st = AppendValue(value, shard.shard_path, io_, bytes);
    const std::string where = "row " + std::to_string(row) + " (row group " + std::to_string(group) + ") column '" +
                              columns[c] + "'";
    if (!st.ok()) return st.WithContext(shard.shard_path + ": " + where);
    MemberRef member{columns[c], where, at, bytes->size() - at};
    member.row_value = true;
    entry->members.push_back(std::move(member));
  }
  entry->end = bytes->size();
  return Status::Ok();
}

}  // namespace stoker
