// pipeline/direct_arrays.cc — see direct_arrays.h.
#include "pipeline/direct_arrays.h"

#include <algorithm>
#include <cstring>

#include "formats/npy.h"
#include "formats/zip.h"

namespace stoker {

namespace {

// The header says what the slot expects, stored plainly, with its data at `data_offset` and nothing after it.
bool PlainAt(const ArrayInfo& info, const ArraySlot& slot, uint64_t data_offset, uint64_t npy_size) {
  return info.dtype == slot.dtype && info.shape == slot.sample_shape && IsPlainNpyData(info) &&
         info.data_offset == data_offset && info.data_offset + slot.sample_bytes == npy_size;
}

}  // namespace

void PredictDirect(const BatchLayout& layout, SampleView entry, std::vector<DirectRange>* out) {
  out->clear();
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    const FieldLayout& field = layout.fields[f];
    const FieldKind kind = field.spec.kind;
    if ((kind != FieldKind::kNpy && kind != FieldKind::kNpz) || field.gzip) continue;  // gzip: inflated first
    std::optional<MemberView> member = entry.Find(field.spec.field);
    if (!member || !member->inline_data.empty() || member->offset < entry.begin ||
        member->offset + member->size > entry.end) {
      continue;
    }
    const uint64_t at = member->at;
    if (kind == FieldKind::kNpy) {
      const uint64_t bytes = layout.arrays[field.arrays[0]].sample_bytes;
      if (bytes > 0 && member->size > bytes) out->push_back({at + member->size - bytes, bytes, field.arrays[0], f});
      continue;
    }
    if (field.probe_data_offsets.empty() || member->size != field.probe_member_size) continue;
    for (size_t i = 0; i < field.arrays.size(); ++i) {
      const uint64_t bytes = layout.arrays[field.arrays[i]].sample_bytes;
      if (bytes > 0) out->push_back({at + field.probe_data_offsets[i], bytes, field.arrays[i], f});
    }
  }
  std::sort(out->begin(), out->end(), [](const DirectRange& a, const DirectRange& b) { return a.offset < b.offset; });
}

bool VerifyDirect(const BatchLayout& layout, const FieldLayout& field, std::span<const uint8_t> member,
                  uint64_t member_offset, std::span<const DirectRange> ranges, uint8_t* batch_buffer, int slot) {
  if (field.spec.kind == FieldKind::kNpy) {
    if (ranges.size() != 1) return false;
    Result<ArrayInfo> info = ParseNpyHeader(member);
    return info.ok() && PlainAt(*info, layout.arrays[ranges[0].array], ranges[0].offset - member_offset, member.size());
  }
  if (ranges.size() != field.arrays.size()) return false;
  Result<std::vector<ZipEntry>> entries = ListZip(member);
  if (!entries.ok()) return false;
  for (size_t i = 0; i < field.names.size(); ++i) {
    const std::string want = field.names[i] + ".npy";
    const ZipEntry* e = nullptr;
    for (const ZipEntry& x : *entries)
      if (x.name == want) e = &x;  // the last of equal names, as DecodeNpz takes
    const DirectRange* range = nullptr;
    for (const DirectRange& r : ranges)
      if (r.array == field.arrays[i]) range = &r;
    if (e == nullptr || range == nullptr || e->method != 0 || e->encrypted ||
        e->compressed_size != e->uncompressed_size) {
      return false;
    }
    Result<uint64_t> at = ZipEntryDataOffset(member, *e);
    if (!at.ok() || *at > member.size() || e->uncompressed_size > member.size() - *at) return false;
    const std::span<const uint8_t> npy = member.subspan(*at, e->uncompressed_size);
    Result<ArrayInfo> info = ParseNpyHeader(npy);
    const ArraySlot& a = layout.arrays[range->array];
    if (!info.ok() || !PlainAt(*info, a, range->offset - member_offset - *at, npy.size())) return false;
    // The entry's CRC over its bytes: the header here, the data in the slot.
    const uint32_t head = ZipCrc32(0, npy.first(info->data_offset));
    if (ZipCrc32(head, {layout.arrays[range->array].At(batch_buffer, slot), a.sample_bytes}) != e->crc32) return false;
  }
  return true;
}

void RestoreDirect(const BatchLayout& layout, std::span<const DirectRange> ranges, const uint8_t* batch_buffer,
                   int slot, std::span<uint8_t> sample) {
  for (const DirectRange& r : ranges) {
    std::memcpy(sample.data() + r.offset, layout.arrays[r.array].At(batch_buffer, slot), r.size);
  }
}

}  // namespace stoker
