// formats/parquet/parquet_file.cc — Parquet files through Arrow's C++
// Parquet reader; see formats/parquet_file.h.
#include "formats/parquet_file.h"

#include <arrow/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

#include "formats/npy.h"
#include "formats/parquet/reader_file.h"

namespace stoker {

class ParquetFooter {
 public:
  std::string path;
  std::shared_ptr<parquet::FileMetaData> metadata;
  std::shared_ptr<arrow::Schema> schema;  // as Arrow reads it back (ARROW:schema kept)
  std::vector<int64_t> group_first_row;   // per row group, and the total rows last

  // The row group holding `row`.
  int GroupOf(int64_t row) const {
    auto it = std::upper_bound(group_first_row.begin(), group_first_row.end(), row);
    return static_cast<int>(it - group_first_row.begin()) - 1;
  }
};

// One decoded row group: its wanted columns, in ParquetRows::columns_ order.
struct ParquetRows::Group {
  std::vector<std::shared_ptr<arrow::ChunkedArray>> columns;
};

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status FromArrow(const arrow::Status& st, const std::string& context) {
  if (st.ok()) return Status::Ok();
  return (st.IsIOError() ? IoError(st.message()) : DataLoss(st.message())).WithContext(context);
}

std::string ColumnNames(const arrow::Schema& schema) {
  std::string out;
  for (const auto& f : schema.fields()) out += (out.empty() ? "" : ", ") + f->name();
  return out;
}

// The Hub's Image() column: a struct whose child "bytes" holds the encoded image.
bool IsBinaryLike(arrow::Type::type id) {
  return arrow::is_binary_like(id) || arrow::is_large_binary_like(id) || id == arrow::Type::BINARY_VIEW ||
         id == arrow::Type::STRING_VIEW || id == arrow::Type::FIXED_SIZE_BINARY;
}

bool IsImageStruct(const arrow::DataType& type) {
  if (type.id() != arrow::Type::STRUCT) return false;
  const auto& s = static_cast<const arrow::StructType&>(type);
  const int bytes = s.GetFieldIndex("bytes");
  return bytes >= 0 && IsBinaryLike(s.field(bytes)->type()->id());
}

// The numpy dtype of a list's element type, if stoker has it.
std::optional<DType> NumericDType(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::UINT8: return DType::kU8;
    case arrow::Type::INT8: return DType::kI8;
    case arrow::Type::UINT16: return DType::kU16;
    case arrow::Type::INT16: return DType::kI16;
    case arrow::Type::UINT32: return DType::kU32;
    case arrow::Type::INT32: return DType::kI32;
    case arrow::Type::UINT64: return DType::kU64;
    case arrow::Type::INT64: return DType::kI64;
    case arrow::Type::HALF_FLOAT: return DType::kF16;
    case arrow::Type::FLOAT: return DType::kF32;
    case arrow::Type::DOUBLE: return DType::kF64;
    default: return std::nullopt;
  }
}

bool IsNumericList(const arrow::DataType& type) {
  if (type.id() != arrow::Type::FIXED_SIZE_LIST && type.id() != arrow::Type::LIST &&
      type.id() != arrow::Type::LARGE_LIST) {
    return false;
  }
  return NumericDType(type.field(0)->type()->id()).has_value();
}

std::string SuggestedField(const arrow::DataType& type) {
  if (IsImageStruct(type)) return "image";
  if (type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING ||
      type.id() == arrow::Type::STRING_VIEW) {
    return "text";
  }
  if (IsBinaryLike(type.id())) return "raw";  // image() when it holds JPEG/PNG/WebP
  if (arrow::is_integer(type.id()) || arrow::is_floating(type.id()) || type.id() == arrow::Type::BOOL) {
    return "scalar";
  }
  if (IsNumericList(type)) return "npy";
  return "";
}

template <typename T>
void AppendText(T v, RowBytes* out) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round trip for floats
  out->insert(out->end(), buf, end);
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

// Appends row `i` of `array` (see the header's table of types) to *out;
// `parquet_path` resolves an image struct's relative path, read with `io`.
Status AppendValue(const arrow::Array& array, int64_t i, const std::string& parquet_path, const IoOptions& io,
                   RowBytes* out) {
  if (array.IsNull(i)) return DataLoss("value is null");
  auto append = [out](std::string_view v) { out->insert(out->end(), v.begin(), v.end()); };
  switch (array.type_id()) {
    case arrow::Type::BINARY:
    case arrow::Type::STRING:
      append(static_cast<const arrow::BinaryArray&>(array).GetView(i));
      return Status::Ok();
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::LARGE_STRING:
      append(static_cast<const arrow::LargeBinaryArray&>(array).GetView(i));
      return Status::Ok();
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::STRING_VIEW:
      append(static_cast<const arrow::BinaryViewArray&>(array).GetView(i));
      return Status::Ok();
    case arrow::Type::FIXED_SIZE_BINARY:
      append(static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(i));
      return Status::Ok();
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(array);
      std::shared_ptr<arrow::Array> bytes = s.GetFieldByName("bytes");
      if (!bytes || !IsBinaryLike(bytes->type_id())) break;
      if (!bytes->IsNull(i)) return AppendValue(*bytes, i, parquet_path, io, out);
      std::shared_ptr<arrow::Array> path = s.GetFieldByName("path");
      if (!path || path->type_id() != arrow::Type::STRING || path->IsNull(i)) {
        return DataLoss("image struct has null 'bytes' and no 'path'");
      }
      return AppendImageFile(parquet_path, static_cast<const arrow::StringArray&>(*path).GetView(i), io, out);
    }
    case arrow::Type::BOOL: AppendText(int{static_cast<const arrow::BooleanArray&>(array).Value(i)}, out); return Status::Ok();
    case arrow::Type::INT8: AppendText(int{static_cast<const arrow::Int8Array&>(array).Value(i)}, out); return Status::Ok();
    case arrow::Type::UINT8: AppendText(unsigned{static_cast<const arrow::UInt8Array&>(array).Value(i)}, out); return Status::Ok();
    case arrow::Type::INT16: AppendText(static_cast<const arrow::Int16Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::UINT16: AppendText(static_cast<const arrow::UInt16Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::INT32: AppendText(static_cast<const arrow::Int32Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::UINT32: AppendText(static_cast<const arrow::UInt32Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::INT64: AppendText(static_cast<const arrow::Int64Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::UINT64: AppendText(static_cast<const arrow::UInt64Array&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::FLOAT: AppendText(static_cast<const arrow::FloatArray&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::DOUBLE: AppendText(static_cast<const arrow::DoubleArray&>(array).Value(i), out); return Status::Ok();
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      if (!IsNumericList(*array.type())) break;
      int64_t offset = 0, length = 0;
      std::shared_ptr<arrow::Array> values;
      if (array.type_id() == arrow::Type::FIXED_SIZE_LIST) {
        const auto& l = static_cast<const arrow::FixedSizeListArray&>(array);
        offset = l.value_offset(i), length = l.value_length(i), values = l.values();
      } else if (array.type_id() == arrow::Type::LIST) {
        const auto& l = static_cast<const arrow::ListArray&>(array);
        offset = l.value_offset(i), length = l.value_length(i), values = l.values();
      } else {
        const auto& l = static_cast<const arrow::LargeListArray&>(array);
        offset = l.value_offset(i), length = l.value_length(i), values = l.values();
      }
      std::shared_ptr<arrow::Array> slice = values->Slice(offset, length);
      if (slice->null_count() > 0) return DataLoss("list holds a null element");
      const DType dtype = *NumericDType(values->type_id());
      const size_t width = DTypeSize(dtype);
      const auto& prim = static_cast<const arrow::PrimitiveArray&>(*slice);
      const uint8_t* data = prim.values()->data() + static_cast<size_t>(slice->offset()) * width;
      std::vector<uint8_t> npy = EncodeNpy(dtype, {length}, {data, static_cast<size_t>(length) * width});
      out->insert(out->end(), npy.begin(), npy.end());
      return Status::Ok();
    }
    default:
      break;
  }
  return InvalidArgument("column type " + array.type()->ToString() +
                         " is not read by stoker (binary, string, image struct {bytes, path}, numbers, "
                         "lists of numbers are)");
}

}  // namespace

bool IsParquetPath(std::string_view path) {
  const size_t q = path.find_first_of("?#");  // a URL's query is not its name
  if (q != std::string_view::npos && (path.starts_with("http://") || path.starts_with("https://"))) {
    path = path.substr(0, q);
  }
  return path.size() >= 8 && Lower(path.substr(path.size() - 8)) == ".parquet";
}

bool ParquetSupported() { return true; }

Result<ShardIndex> LoadParquetIndex(const std::string& path, const IoOptions& io) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> reader, OpenReader(path, io));
  auto footer = std::make_shared<ParquetFooter>();
  footer->path = path;
  const uint64_t size = reader->Size();
  // Arrow reads the footer's length and magic from the last 8 bytes; what it
  // says about a bad one lacks the file and where it looked.
  const std::string where = path + ": not a readable Parquet file (" + std::to_string(size) +
                            " bytes; its footer ends at offset " + std::to_string(size) +
                            ", magic expected at offset " + std::to_string(size >= 4 ? size - 4 : 0) + ")";
  try {
    auto file = std::make_shared<ReaderFile>(reader.get());
    std::unique_ptr<parquet::ParquetFileReader> pq = parquet::ParquetFileReader::Open(file);
    footer->metadata = pq->metadata();
    std::shared_ptr<arrow::Schema> schema;
    parquet::ArrowReaderProperties props;
    arrow::Status st = parquet::arrow::FromParquetSchema(footer->metadata->schema(), props,
                                                          footer->metadata->key_value_metadata(), &schema);
    if (!st.ok()) return FromArrow(st, where);
    footer->schema = std::move(schema);
  } catch (const parquet::ParquetException& e) {
    return DataLoss(where + ": " + e.what());
  }
  const parquet::FileMetaData& md = *footer->metadata;
  ShardIndex index;
  index.shard_path = path;
  index.shard_size = size;
  index.samples.reserve(static_cast<size_t>(md.num_rows()));
  int64_t first = 0;
  uint64_t at = 0;  // the estimated byte position of the next row (see the header)
  for (int g = 0; g < md.num_row_groups(); ++g) {
    std::unique_ptr<parquet::RowGroupMetaData> rg = md.RowGroup(g);
    footer->group_first_row.push_back(first);
    const int64_t rows = rg->num_rows();
    const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(rg->total_compressed_size(), rows));
    for (int64_t r = 0; r < rows; ++r) {
      SampleEntry e;
      e.key = std::to_string(first + r);
      e.begin = at + bytes * static_cast<uint64_t>(r) / static_cast<uint64_t>(rows);
      e.end = at + bytes * static_cast<uint64_t>(r + 1) / static_cast<uint64_t>(rows);
      index.samples.push_back(std::move(e));
    }
    at += bytes;
    first += rows;
  }
  footer->group_first_row.push_back(first);
  index.parquet = std::move(footer);
  return index;
}

int ParquetShuffleBlock(const std::vector<ShardIndex>& indexes) {
  int64_t rows = 0, groups = 0;
  for (const ShardIndex& index : indexes) {
    if (!index.parquet) continue;
    rows += index.parquet->metadata->num_rows();
    groups += index.parquet->metadata->num_row_groups();
  }
  return static_cast<int>(std::clamp<int64_t>(groups ? rows / groups : 2, 2, 1024));
}

uint64_t ParquetMaxRowGroupBytes(const ShardIndex& index) {
  if (!index.parquet) return 0;
  int64_t most = 0;
  const parquet::FileMetaData& md = *index.parquet->metadata;
  for (int g = 0; g < md.num_row_groups(); ++g) most = std::max(most, md.RowGroup(g)->total_byte_size());
  return static_cast<uint64_t>(most);
}

Result<ParquetSummary> DescribeParquet(const ShardIndex& index) {
  if (!index.parquet) return InvalidArgument(index.shard_path + " is not a Parquet file");
  const ParquetFooter& f = *index.parquet;
  ParquetSummary s;
  s.rows = f.metadata->num_rows();
  s.row_groups = f.metadata->num_row_groups();
  s.created_by = f.metadata->created_by();
  for (const auto& field : f.schema->fields()) {
    s.columns.push_back({field->name(), field->type()->ToString(), SuggestedField(*field->type())});
  }
  return s;
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

Result<std::shared_ptr<const ParquetRows::Group>> ParquetRows::GetGroup(const ShardIndex& shard,
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
  // Decoded outside the lock: other row groups load and hit meanwhile.
  auto decoded = std::make_shared<Group>();
  Status st;
  const std::string context = shard.shard_path + ": row group " + std::to_string(group);
  try {
    // Which leaf columns: every leaf under each wanted column, but of an
    // image struct only "bytes" and "path" (read when "bytes" is null).
    const parquet::SchemaDescriptor& schema = *footer->metadata->schema();
    std::vector<int> leaves;
    for (const std::string& name : columns_) {
      const int field = footer->schema->GetFieldIndex(name);
      if (field < 0) {
        st = NotFound(shard.shard_path + " has no column '" + name + "' (it has: " + ColumnNames(*footer->schema) + ")");
        break;
      }
      const bool image = IsImageStruct(*footer->schema->field(field)->type());
      for (int c = 0; c < schema.num_columns(); ++c) {
        const std::vector<std::string> path = schema.Column(c)->path()->ToDotVector();
        if (path[0] != name) continue;
        if (image && (path.size() < 2 || (path[1] != "bytes" && path[1] != "path"))) continue;
        leaves.push_back(c);
      }
    }
    if (st.ok()) {
      auto source = std::make_shared<ReaderFile>(&file);
      std::unique_ptr<parquet::ParquetFileReader> pq =
          parquet::ParquetFileReader::Open(source, parquet::default_reader_properties(), footer->metadata);
      parquet::ArrowReaderProperties props;
      props.set_use_threads(false);  // stoker's readers are the parallelism
      auto reader = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), props);
      if (!reader.ok()) {
        st = FromArrow(reader.status(), context);
      } else {
        arrow::Result<std::shared_ptr<arrow::Table>> table = (*reader)->ReadRowGroup(group, leaves);
        if (!table.ok()) {
          st = FromArrow(table.status(), context);
        } else {
          for (const std::string& name : columns_) decoded->columns.push_back((*table)->GetColumnByName(name));
        }
      }
    }
  } catch (const parquet::ParquetException& e) {
    st = DataLoss(context + ": " + e.what());
  }
  std::lock_guard lock(mu_);
  if (!st.ok()) {
    slots_.erase(slot);
    loaded_.notify_all();
    return st;
  }
  slot->data = decoded;
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
  return std::shared_ptr<const Group>(decoded);
}

Status ParquetRows::Read(const ShardIndex& shard, const RandomAccessReader& file, uint32_t row, RowBytes* bytes,
                         SampleEntry* entry) {
  if (!shard.parquet) return Internal(shard.shard_path + " read as Parquet but has no Parquet footer");
  const ParquetFooter& footer = *shard.parquet;
  const int group = footer.GroupOf(row);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Group> decoded, GetGroup(shard, file, group));
  const int64_t in_group = static_cast<int64_t>(row) - footer.group_first_row[static_cast<size_t>(group)];
  entry->key = std::to_string(row);
  entry->members.clear();
  entry->begin = bytes->size();
  for (size_t c = 0; c < columns_.size(); ++c) {
    const arrow::ChunkedArray& column = *decoded->columns[c];
    int64_t i = in_group;
    int k = 0;
    while (k < column.num_chunks() && i >= column.chunk(k)->length()) i -= column.chunk(k)->length(), ++k;
    const size_t at = bytes->size();
    Status st = k < column.num_chunks() ? AppendValue(*column.chunk(k), i, shard.shard_path, io_, bytes)
                                        : Internal("row past the decoded row group");
    if (!st.ok()) {
      return st.WithContext(shard.shard_path + ": row " + std::to_string(row) + " (row group " +
                            std::to_string(group) + ") column '" + columns_[c] + "'");
    }
    MemberRef member{columns_[c],
                     "row " + std::to_string(row) + " (row group " + std::to_string(group) + ") column '" +
                         columns_[c] + "'",
                     at, bytes->size() - at};
    member.row_value = true;
    entry->members.push_back(std::move(member));
  }
  entry->end = bytes->size();
  return Status::Ok();
}

}  // namespace stoker
