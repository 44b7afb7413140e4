#include "pipeline/batch_layout.h"

#include "formats/gzip_member.h"
#include "formats/npy.h"
#include "formats/zip.h"

namespace stoker {

namespace {

constexpr size_t kRegionAlignment = 64;

size_t Product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void AddArray(BatchLayout& layout, FieldLayout* field, std::string name, DType dtype, std::vector<int64_t> shape) {
  ArraySlot slot;
  slot.name = std::move(name);
  slot.dtype = dtype;
  slot.sample_bytes = Product(shape) * DTypeSize(dtype);
  slot.sample_shape = std::move(shape);
  layout.arrays.push_back(std::move(slot));
  if (field) field->arrays.push_back(layout.arrays.size() - 1);
}

Result<ArrayInfo> ProbeNpy(std::span<const uint8_t> npy, const std::string& where) {
  Result<ArrayInfo> info = ParseNpyHeader(npy);
  if (!info.ok()) return info.status().WithContext(where);
  return info;
}

void AssignOffsets(BatchLayout& layout, int batch_size) {
  size_t offset = 0;
  for (ArraySlot& a : layout.arrays) {
    a.offset = offset;
    offset += a.sample_bytes * static_cast<size_t>(batch_size);
    offset = (offset + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
  }
  layout.buffer_bytes = offset;
}

}  // namespace

Status AppendArrays(BatchLayout& layout, std::vector<ArraySlot> extra) {
  for (ArraySlot& a : extra) {
    for (const ArraySlot& have : layout.arrays) {
      if (have.name == a.name) return InvalidArgument("the batch already has an array named '" + a.name + "'");
    }
    AddArray(layout, nullptr, std::move(a.name), a.dtype, std::move(a.sample_shape));
  }
  AssignOffsets(layout, layout.batch_size);
  return Status::Ok();
}

size_t GzipMemberLimit(const FieldSpec& spec) {
  switch (spec.kind) {
    case FieldKind::kBytes:
    case FieldKind::kText:
    case FieldKind::kJson:
    case FieldKind::kMsgpack:
    case FieldKind::kPickle:
      return spec.max_bytes;
    default:
      return kGzipMemberDefaultLimit;
  }
}

BatchLayout MakeTokenLayout(int sample_tokens, int batch_size, bool blend) {
  BatchLayout layout;
  layout.batch_size = batch_size;
  AddArray(layout, nullptr, "tokens", DType::kI64, {sample_tokens});
  if (blend) AddArray(layout, nullptr, "dataset_id", DType::kI64, {});
  AddArray(layout, nullptr, "__index__", DType::kI64, {});
  layout.index_array = layout.arrays.size() - 1;
  AssignOffsets(layout, batch_size);
  return layout;
}

Result<BatchLayout> MakeBatchLayout(const std::vector<FieldSpec>& fields, int batch_size, SampleView entry,
                                    std::span<const uint8_t> probe, const std::string& where) {
  if (fields.empty()) return InvalidArgument("no fields requested");
  BatchLayout layout;
  layout.batch_size = batch_size;
  for (const FieldSpec& spec : fields) {
    FieldLayout field;
    field.spec = spec;
    field.gzip = IsGzipField(spec.field);
    std::optional<MemberView> member = entry.Find(spec.field);
    std::string member_where = member ? where + ": member '" + member->name() + "' at offset " +
                                            std::to_string(member->offset)
                                      : where;
    GzipInflater gunzip;
    auto member_bytes = [&]() -> Result<std::span<const uint8_t>> {
      if (!member) {
        return NotFound(where + ": sample '" + std::string(entry.key) + "' has no member for field '" + spec.field + "'");
      }
      if (!field.gzip) return member->data(probe);
      Result<std::span<const uint8_t>> plain = gunzip.Inflate(member->data(probe), GzipMemberLimit(spec));
      if (!plain.ok()) return plain.status().WithContext(member_where);
      return plain;
    };
    switch (spec.kind) {
      case FieldKind::kImage: {
        STOKER_RETURN_IF_ERROR(spec.image.Validate().WithContext("field '" + spec.field + "'"));
        DType dt = spec.image.pixel == PixelType::kFloat32 ? DType::kF32 : DType::kU8;
        AddArray(layout, &field, spec.field, dt, spec.image.OutputShape());
        if (spec.image.variable) AddArray(layout, &field, spec.field + ".shape", DType::kI64, {3});
        break;
      }
      case FieldKind::kScalar:
        AddArray(layout, &field, spec.field, spec.dtype, {});
        break;
      case FieldKind::kBytes:
      case FieldKind::kText:
      case FieldKind::kJson:
      case FieldKind::kMsgpack:
      case FieldKind::kPickle:
        if (spec.max_bytes == 0) return InvalidArgument("field '" + spec.field + "': bytes needs max_bytes > 0");
        AddArray(layout, &field, spec.field, DType::kU8, {static_cast<int64_t>(spec.max_bytes)});
        AddArray(layout, &field, spec.field + ".len", DType::kI64, {});
        break;
      case FieldKind::kNpy: {
        STOKER_ASSIGN_OR_RETURN(auto bytes, member_bytes());
        STOKER_ASSIGN_OR_RETURN(ArrayInfo info, ProbeNpy(bytes, member_where));
        AddArray(layout, &field, spec.field, info.dtype, info.shape);
        break;
      }
      case FieldKind::kNpz: {
        STOKER_ASSIGN_OR_RETURN(auto bytes, member_bytes());
        Result<std::vector<ZipEntry>> entries = ListZip(bytes);
        if (!entries.ok()) return entries.status().WithContext(member_where);
        std::vector<uint8_t> scratch;
        bool plain = true;  // every array stored and plain: offsets worth predicting
        for (const ZipEntry& e : *entries) {
          if (!e.name.ends_with(".npy")) continue;
          std::string array_where = member_where + ": array '" + e.name + "'";
          scratch.resize(e.uncompressed_size);
          Status st = ExtractZipEntry(bytes, e, scratch);
          if (!st.ok()) return st.WithContext(array_where);
          STOKER_ASSIGN_OR_RETURN(ArrayInfo info, ProbeNpy(scratch, array_where));
          std::string name = e.name.substr(0, e.name.size() - 4);
          field.names.push_back(name);
          AddArray(layout, &field, spec.field + "/" + name, info.dtype, info.shape);
          Result<uint64_t> at = ZipEntryDataOffset(bytes, e);
          plain = plain && e.method == 0 && at.ok() && IsPlainNpyData(info) &&
                  info.data_offset + info.nbytes() == e.uncompressed_size;
          if (plain) field.probe_data_offsets.push_back(*at + info.data_offset);
        }
        if (field.names.empty()) return DataLoss(member_where + ": the npz holds no .npy arrays");
        if (plain && !field.gzip) {
          field.probe_member_size = bytes.size();
        } else {
          field.probe_data_offsets.clear();
        }
        break;
      }
    }
    layout.fields.push_back(std::move(field));
  }
  AddArray(layout, nullptr, "__index__", DType::kI64, {});
  layout.index_array = layout.arrays.size() - 1;

  AssignOffsets(layout, batch_size);
  return layout;
}

}  // namespace stoker
