// formats/parquet/arrow_engine.cc — the Parquet plugin: Arrow's C++ Parquet
// reader behind formats/parquet/engine.h. Built once per pyarrow major
// (libstoker_parquet_arrow<major>.so, CMakeLists.txt) against that wheel's
// headers and libraries; exports stoker_parquet_engine only.
#include <arrow/api.h>
#include <arrow/config.h>
#include <arrow/util/config.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "formats/parquet/engine.h"
#include "formats/parquet/reader_file.h"

namespace stoker {
namespace {

class ArrowFooter : public ParquetFooter {
 public:
  std::shared_ptr<parquet::FileMetaData> metadata;
  std::shared_ptr<arrow::Schema> schema;  // as Arrow reads it back (ARROW:schema kept)
};

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

// The element width in bytes of NumericDType's types.
size_t NumericWidth(arrow::Type::type id) {
  return static_cast<size_t>(arrow::bit_width(id) / 8);
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
std::string_view Text(T v, std::string* scratch) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round trip for floats
  scratch->assign(buf, end);
  return *scratch;
}

// Row `i` of `array` (see parquet_file.h's table of types).
Status ValueOf(const arrow::Array& array, int64_t i, std::string* scratch, ParquetValue* out) {
  if (array.IsNull(i)) return DataLoss("value is null");
  out->kind = ParquetValue::Kind::kBytes;
  switch (array.type_id()) {
    case arrow::Type::BINARY:
    case arrow::Type::STRING:
      out->bytes = static_cast<const arrow::BinaryArray&>(array).GetView(i);
      return Status::Ok();
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::LARGE_STRING:
      out->bytes = static_cast<const arrow::LargeBinaryArray&>(array).GetView(i);
      return Status::Ok();
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::STRING_VIEW:
      out->bytes = static_cast<const arrow::BinaryViewArray&>(array).GetView(i);
      return Status::Ok();
    case arrow::Type::FIXED_SIZE_BINARY:
      out->bytes = static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(i);
      return Status::Ok();
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(array);
      std::shared_ptr<arrow::Array> bytes = s.GetFieldByName("bytes");
      if (!bytes || !IsBinaryLike(bytes->type_id())) break;
      if (!bytes->IsNull(i)) return ValueOf(*bytes, i, scratch, out);
      std::shared_ptr<arrow::Array> path = s.GetFieldByName("path");
      if (!path || path->type_id() != arrow::Type::STRING || path->IsNull(i)) {
        return DataLoss("image struct has null 'bytes' and no 'path'");
      }
      out->kind = ParquetValue::Kind::kImagePath;
      out->bytes = static_cast<const arrow::StringArray&>(*path).GetView(i);
      return Status::Ok();
    }
    case arrow::Type::BOOL: out->bytes = Text(int{static_cast<const arrow::BooleanArray&>(array).Value(i)}, scratch); return Status::Ok();
    case arrow::Type::INT8: out->bytes = Text(int{static_cast<const arrow::Int8Array&>(array).Value(i)}, scratch); return Status::Ok();
    case arrow::Type::UINT8: out->bytes = Text(unsigned{static_cast<const arrow::UInt8Array&>(array).Value(i)}, scratch); return Status::Ok();
    case arrow::Type::INT16: out->bytes = Text(static_cast<const arrow::Int16Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::UINT16: out->bytes = Text(static_cast<const arrow::UInt16Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::INT32: out->bytes = Text(static_cast<const arrow::Int32Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::UINT32: out->bytes = Text(static_cast<const arrow::UInt32Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::INT64: out->bytes = Text(static_cast<const arrow::Int64Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::UINT64: out->bytes = Text(static_cast<const arrow::UInt64Array&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::FLOAT: out->bytes = Text(static_cast<const arrow::FloatArray&>(array).Value(i), scratch); return Status::Ok();
    case arrow::Type::DOUBLE: out->bytes = Text(static_cast<const arrow::DoubleArray&>(array).Value(i), scratch); return Status::Ok();
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
      const size_t width = NumericWidth(values->type_id());
      const auto& prim = static_cast<const arrow::PrimitiveArray&>(*slice);
      const uint8_t* data = prim.values()->data() + static_cast<size_t>(slice->offset()) * width;
      out->kind = ParquetValue::Kind::kNumbers;
      out->dtype = *NumericDType(values->type_id());
      out->count = length;
      out->bytes = {reinterpret_cast<const char*>(data), static_cast<size_t>(length) * width};
      return Status::Ok();
    }
    default:
      break;
  }
  return InvalidArgument("column type " + array.type()->ToString() +
                         " is not read by stoker (binary, string, image struct {bytes, path}, numbers, "
                         "lists of numbers are)");
}

class ArrowGroup : public ParquetGroup {
 public:
  std::vector<std::shared_ptr<arrow::ChunkedArray>> columns;  // in the order asked for

  Status Value(size_t column, int64_t row, std::string* scratch, ParquetValue* out) const override {
    if (column >= columns.size()) return Internal("column past those decoded");
    const arrow::ChunkedArray& c = *columns[column];
    int64_t i = row;
    int k = 0;
    while (k < c.num_chunks() && i >= c.chunk(k)->length()) i -= c.chunk(k)->length(), ++k;
    if (k >= c.num_chunks()) return Internal("row past the decoded row group");
    return ValueOf(*c.chunk(k), i, scratch, out);
  }
};

class ArrowEngine final : public ParquetEngine {
 public:
  Result<std::shared_ptr<const ParquetFooter>> ReadFooter(const std::string& path,
                                                          const RandomAccessReader& reader) const override {
    auto footer = std::make_shared<ArrowFooter>();
    footer->path = path;
    const uint64_t size = reader.Size();
    // Arrow reads the footer's length and magic from the last 8 bytes; what it
    // says about a bad one lacks the file and where it looked.
    const std::string where = path + ": not a readable Parquet file (" + std::to_string(size) +
                              " bytes; its footer ends at offset " + std::to_string(size) +
                              ", magic expected at offset " + std::to_string(size >= 4 ? size - 4 : 0) + ")";
    try {
      auto file = std::make_shared<ReaderFile>(&reader);
      std::unique_ptr<parquet::ParquetFileReader> pq = parquet::ParquetFileReader::Open(file);
      footer->metadata = pq->metadata();
      std::shared_ptr<arrow::Schema> schema;
      parquet::ArrowReaderProperties props;
      arrow::Status st = parquet::arrow::FromParquetSchema(footer->metadata->schema(), props,
                                                            footer->metadata->key_value_metadata(), &schema);
      if (!st.ok()) return FromArrow(st, where);
      footer->schema = std::move(schema);
      const parquet::FileMetaData& md = *footer->metadata;
      int64_t first = 0;
      for (int g = 0; g < md.num_row_groups(); ++g) {
        std::unique_ptr<parquet::RowGroupMetaData> rg = md.RowGroup(g);
        footer->group_first_row.push_back(first);
        footer->group_bytes.push_back(static_cast<uint64_t>(std::max<int64_t>(rg->total_compressed_size(),
                                                                              rg->num_rows())));
        footer->max_group_uncompressed =
            std::max(footer->max_group_uncompressed, static_cast<uint64_t>(std::max<int64_t>(rg->total_byte_size(), 0)));
        first += rg->num_rows();
      }
      footer->group_first_row.push_back(first);
      footer->summary.rows = md.num_rows();
      footer->summary.row_groups = md.num_row_groups();
      footer->summary.created_by = md.created_by();
      for (const auto& field : footer->schema->fields()) {
        footer->summary.columns.push_back({field->name(), field->type()->ToString(), SuggestedField(*field->type())});
      }
    } catch (const parquet::ParquetException& e) {
      return DataLoss(where + ": " + e.what());
    } catch (const std::exception& e) {  // none may cross into the engine
      return DataLoss(where + ": " + e.what());
    }
    return std::shared_ptr<const ParquetFooter>(std::move(footer));
  }

  Result<std::shared_ptr<const ParquetGroup>> DecodeGroup(const ParquetFooter& base, const RandomAccessReader& file,
                                                          int group,
                                                          const std::vector<std::string>& columns) const override {
    const auto& footer = static_cast<const ArrowFooter&>(base);  // ReadFooter made it
    const std::string context = footer.path + ": row group " + std::to_string(group);
    auto decoded = std::make_shared<ArrowGroup>();
    try {
      // Which leaf columns: every leaf under each wanted column, but of an
      // image struct only "bytes" and "path" (read when "bytes" is null).
      const parquet::SchemaDescriptor& schema = *footer.metadata->schema();
      std::vector<int> leaves;
      for (const std::string& name : columns) {
        const int field = footer.schema->GetFieldIndex(name);
        if (field < 0) {
          return NotFound(footer.path + " has no column '" + name + "' (it has: " + ColumnNames(*footer.schema) +
                          ")");
        }
        const bool image = IsImageStruct(*footer.schema->field(field)->type());
        for (int c = 0; c < schema.num_columns(); ++c) {
          const std::vector<std::string> path = schema.Column(c)->path()->ToDotVector();
          if (path[0] != name) continue;
          if (image && (path.size() < 2 || (path[1] != "bytes" && path[1] != "path"))) continue;
          leaves.push_back(c);
        }
      }
      auto source = std::make_shared<ReaderFile>(&file);
      std::unique_ptr<parquet::ParquetFileReader> pq =
          parquet::ParquetFileReader::Open(source, parquet::default_reader_properties(), footer.metadata);
      parquet::ArrowReaderProperties props;
      props.set_use_threads(false);  // stoker's readers are the parallelism
      // Arrow 25 added the Result forms; 26 dropped Make's out-parameter one.
#if ARROW_VERSION_MAJOR >= 25
      auto reader = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), props);
      if (!reader.ok()) return FromArrow(reader.status(), context);
      arrow::Result<std::shared_ptr<arrow::Table>> table = (*reader)->ReadRowGroup(group, leaves);
      if (!table.ok()) return FromArrow(table.status(), context);
#else
      std::unique_ptr<parquet::arrow::FileReader> reader;
      arrow::Status made = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pq), props, &reader);
      if (!made.ok()) return FromArrow(made, context);
      std::shared_ptr<arrow::Table> read;
      arrow::Status st = reader->ReadRowGroup(group, leaves, &read);
      if (!st.ok()) return FromArrow(st, context);
      arrow::Result<std::shared_ptr<arrow::Table>> table(std::move(read));
#endif
      for (const std::string& name : columns) decoded->columns.push_back((*table)->GetColumnByName(name));
    } catch (const parquet::ParquetException& e) {
      return DataLoss(context + ": " + e.what());
    } catch (const std::exception& e) {
      return DataLoss(context + ": " + e.what());
    }
    return std::shared_ptr<const ParquetGroup>(std::move(decoded));
  }

  std::string ArrowVersion() const override { return arrow::GetBuildInfo().version_string; }
};

}  // namespace

}  // namespace stoker

extern "C" __attribute__((visibility("default"))) const stoker::ParquetEngine* stoker_parquet_engine(int abi) {
  static const stoker::ArrowEngine engine;
  return abi == stoker::kParquetEngineAbi ? &engine : nullptr;
}
