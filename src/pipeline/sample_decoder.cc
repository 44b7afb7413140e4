#include "pipeline/sample_decoder.h"

#include <charconv>
#include <cstring>

#include "formats/gzip_member.h"
#include "formats/msgpack_check.h"
#include "formats/npy.h"
#include "formats/text_check.h"
#include "formats/zip.h"
#include "codecs/sample_geometry.h"
#include "observe/clock.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/mix_seed.h"
#include "pipeline/sample_map.h"

namespace stoker {

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

template <typename T>
void StoreAs(double v, uint8_t* out) {
  T t = static_cast<T>(v);
  std::memcpy(out, &t, sizeof(T));
}

Status ParseScalar(std::span<const uint8_t> text, DType dtype, uint8_t* out) {
  std::string_view s(reinterpret_cast<const char*>(text.data()), text.size());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  const bool is_float = dtype == DType::kF32 || dtype == DType::kF64;
  if (!is_float) {
    long long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
      return DataLoss("'" + std::string(s.substr(0, 40)) + "' is not an integer");
    }
    switch (dtype) {
      case DType::kI64: StoreAs<int64_t>(v, out); break;
      case DType::kI32: StoreAs<int32_t>(v, out); break;
      case DType::kI16: StoreAs<int16_t>(v, out); break;
      case DType::kU8: StoreAs<uint8_t>(v, out); break;
      default: { int64_t w = v; std::memcpy(out, &w, std::min<size_t>(8, DTypeSize(dtype))); }
    }
    return Status::Ok();
  }
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return DataLoss("'" + std::string(s.substr(0, 40)) + "' is not a number");
  }
  if (dtype == DType::kF32) StoreAs<float>(v, out); else StoreAs<double>(v, out);
  return Status::Ok();
}

}  // namespace

Status CopyCheckedNpy(std::span<const uint8_t> npy, const ArraySlot& slot, std::span<uint8_t> out) {
  STOKER_ASSIGN_OR_RETURN(ArrayInfo info, ParseNpyHeader(npy));
  if (info.dtype != slot.dtype || info.shape != slot.sample_shape) {
    return DataLoss(std::string("array is ") + DTypeName(info.dtype) + ShapeString(info.shape) + ", expected " +
                    DTypeName(slot.dtype) + ShapeString(slot.sample_shape) + " as in the first sample");
  }
  return CopyNpyData(info, npy, out);
}

Status SampleDecoder::Decode(const std::string& shard, SampleView entry, std::span<uint8_t> bytes,
                             uint8_t* batch_buffer, int slot, uint64_t sample_seed,
                             std::span<const DirectRange> direct, const GpuSlot* gpu) {
  map_begin_ns_ = map_end_ns_ = 0;
  for (size_t f = 0; f < layout_->fields.size(); ++f) {
    const FieldLayout& field = layout_->fields[f];
    std::optional<MemberView> member = entry.Find(field.spec.field);
    if (!member) {
      std::string have;
      for (MemberView m : entry.members) (have += have.empty() ? "" : ", ") += m.field;
      const std::string_view wanted = entry.members.MemberFieldFor(field.spec.field);
      return NotFound(shard + ": sample '" + std::string(entry.key) + "' at offset " + std::to_string(entry.begin) +
                      " has no member for field '" + field.spec.field + "'" +
                      (wanted != field.spec.field ? " (member '" + std::string(wanted) + "' in its source)" : "") +
                      " (it has: " + have + ")");
    }
    std::span<const uint8_t> data = member->data(bytes);
    if (field.gzip) {  // webdataset's gzfilter: "txt.gz" is gunzipped, then decoded as "txt"
      Result<std::span<const uint8_t>> plain = gunzip_.Inflate(data, GzipMemberLimit(field.spec));
      if (!plain.ok()) {
        return plain.status().WithContext(shard + ": member '" + member->name() + "' at offset " +
                                          std::to_string(member->offset));
      }
      data = *plain;
    }
    // This field's direct ranges: adjacent in `direct`, which is in offset
    // order, since each field's ranges lie inside its own member.
    size_t first = 0;
    while (first < direct.size() && direct[first].field != f) ++first;
    size_t count = 0;
    while (first + count < direct.size() && direct[first + count].field == f) ++count;
    if (count > 0) {
      const std::span<const DirectRange> mine = direct.subspan(first, count);
      if (VerifyDirect(*layout_, field, data, member->at, mine, batch_buffer, slot)) continue;
      RestoreDirect(*layout_, mine, batch_buffer, slot, bytes);
    }
    Status st = DecodeField(f, *member, data, batch_buffer, slot, MixSeed(sample_seed, f), gpu);
    if (!st.ok()) {
      if (member->row_value) return st.WithContext(shard + ": " + member->name());
      return st.WithContext(shard + ": member '" + member->name() + "' at offset " + std::to_string(member->offset));
    }
  }
  if (map_ == nullptr) return Status::Ok();
  // Images bound for the GPU decoder are not in the slot yet: GpuDecode::Create
  // refuses them with a map (pipeline/gpu_decode.cc), so here every field is.
  map_begin_ns_ = NowNs();
  Status st = map_->Apply(MapContext{*layout_, shard, entry.key}, batch_buffer, slot, sample_seed);
  map_end_ns_ = NowNs();
  if (!st.ok()) {
    return st.WithContext(shard + ": sample '" + std::string(entry.key) + "' at offset " + std::to_string(entry.begin) +
                          ": the map");
  }
  return Status::Ok();
}

// Scaled up: the resize makes the source region larger on a side (the
// geometry the decoder took, recomputed: arithmetic only in counted modes).
void SampleDecoder::NoteUpscale(size_t f, const ImageSpec& spec, uint64_t seed) {
  int w = 0, h = 0;
  image_.LastSize(&w, &h);
  if (w <= 0 || h <= 0) return;  // the path did not say (the box filter's region decode)
  Result<SampleGeometry> g = PlanSample(spec, w, h, seed);
  if (!g.ok()) return;
  upscales_->Note(f, g->resized_w > g->crop_w || g->resized_h > g->crop_h, w, h);
}

Status SampleDecoder::DecodeField(size_t f, const MemberView& member, std::span<const uint8_t> data,
                                  uint8_t* batch_buffer, int slot, uint64_t seed, const GpuSlot* gpu) {
  const FieldLayout& field = layout_->fields[f];
  const ArraySlot& first = layout_->arrays[field.arrays[0]];
  std::span<uint8_t> out(first.At(batch_buffer, slot), first.sample_bytes);
  switch (field.spec.kind) {
    case FieldKind::kImage: {
      if (field.spec.image.variable) return DecodeVariableImage(field, data, batch_buffer, slot);
      const bool gpu_field = gpu && gpu->decode && gpu->decode->Decodes(f);
      if (gpu_field && gpu->stage &&
          gpu->decode->Stage(f, data, seed, slot, out, static_cast<uint64_t>(out.data() - batch_buffer), gpu->jobs)) {
        return Status::Ok();
      }
      if (!gpu_field) {
        STOKER_RETURN_IF_ERROR(image_.DecodeInto(data, field.spec.image, seed, out));
        if (upscales_ && UpscaleCounter::Counts(field.spec.image)) NoteUpscale(f, field.spec.image, seed);
        return Status::Ok();
      }
      const uint64_t begin = NowNs();  // the split weighs the CPU's time per image
      Status st = image_.DecodeInto(data, field.spec.image, seed, out);
      gpu->decode->CpuDecoded(NowNs() - begin);
      return st;
    }
    case FieldKind::kNpy:
      return CopyCheckedNpy(data, first, out);
    case FieldKind::kNpz:
      return DecodeNpz(field, data, batch_buffer, slot);
    case FieldKind::kScalar:
      return ParseScalar(data, field.spec.dtype, out.data());
    case FieldKind::kText:
    case FieldKind::kJson:
      STOKER_RETURN_IF_ERROR(field.spec.kind == FieldKind::kText ? CheckUtf8(data) : CheckJson(data));
      [[fallthrough]];
    case FieldKind::kMsgpack:
      if (field.spec.kind == FieldKind::kMsgpack) STOKER_RETURN_IF_ERROR(CheckMsgpack(data));
      [[fallthrough]];
    case FieldKind::kPickle:  // parsed in Python, where the user allowed it (fields.py: pickle)
    case FieldKind::kBytes: {
      if (data.size() > field.spec.max_bytes) {
        return DataLoss(std::to_string(data.size()) + " bytes exceed max_bytes " +
                        std::to_string(field.spec.max_bytes));
      }
      std::memcpy(out.data(), data.data(), data.size());
      std::memset(out.data() + data.size(), 0, out.size() - data.size());
      int64_t len = static_cast<int64_t>(data.size());
      std::memcpy(layout_->arrays[field.arrays[1]].At(batch_buffer, slot), &len, sizeof(len));
      return Status::Ok();
    }
  }
  return Internal("unknown field kind");
}

Status SampleDecoder::DecodeNpz(const FieldLayout& field, std::span<const uint8_t> data, uint8_t* batch_buffer,
                                int slot) {
  STOKER_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, ListZip(data));
  for (size_t i = 0; i < field.names.size(); ++i) {
    const std::string want = field.names[i] + ".npy";
    const ZipEntry* entry = nullptr;
    for (const ZipEntry& e : entries)
      if (e.name == want) entry = &e;
    if (entry == nullptr) return NotFound("npz has no array '" + field.names[i] + "' (the first sample had it)");
    const ArraySlot& slot_info = layout_->arrays[field.arrays[i]];
    std::span<uint8_t> out(slot_info.At(batch_buffer, slot), slot_info.sample_bytes);
    std::span<const uint8_t> npy;
    if (entry->method == 0) {
      STOKER_ASSIGN_OR_RETURN(npy, StoredZipEntryData(data, *entry));
    } else {
      scratch_.resize(entry->uncompressed_size);
      STOKER_RETURN_IF_ERROR(ExtractZipEntry(data, *entry, scratch_).WithContext("array '" + want + "'"));
      npy = scratch_;
    }
    STOKER_RETURN_IF_ERROR(CopyCheckedNpy(npy, slot_info, out).WithContext("array '" + want + "'"));
  }
  return Status::Ok();
}

// A variable-size image: decoded as stored into the start of its
// [max_pixels * channels] slot, its (C, H, W) or (H, W, C) in "<field>.shape".
Status SampleDecoder::DecodeVariableImage(const FieldLayout& field, std::span<const uint8_t> data,
                                          uint8_t* batch_buffer, int slot) {
  const ArraySlot& pixels = layout_->arrays[field.arrays[0]];
  int h = 0, w = 0;
  STOKER_RETURN_IF_ERROR(image_.DecodeVariable(data, field.spec.image, {pixels.At(batch_buffer, slot), pixels.sample_bytes},
                                               &h, &w));
  const int64_t c = field.spec.image.channels;
  const int64_t shape[3] = {field.spec.image.chw ? c : h, field.spec.image.chw ? h : w, field.spec.image.chw ? w : c};
  std::memcpy(layout_->arrays[field.arrays[1]].At(batch_buffer, slot), shape, sizeof(shape));
  return Status::Ok();
}

}  // namespace stoker
