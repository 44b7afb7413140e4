// pipeline/sample_decoder.h — one sample's member bytes into its batch slots.
//
// Owned by one decode thread: it keeps an image decoder (JPEG/PNG/WebP) and a scratch buffer
// for deflated NPZ members, both reused across samples (no per-sample
// allocation once warm). Every error names shard, member, byte offset, cause.
// Thread-safety: one instance per thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "codecs/image_decoder.h"
#include "formats/gzip_member.h"
#include "formats/sample_index.h"
#include "pipeline/batch_layout.h"
#include "pipeline/direct_arrays.h"
#include "pipeline/upscale_count.h"

namespace stoker {

class GpuDecode;
struct GpuJobs;

// A device run's GPU decode, for one slot: with `stage` its images go to
// the GPU decoder, else they decode here and are timed for the split; jobs
// is the batch's.
struct GpuSlot {
  GpuDecode* decode = nullptr;
  bool stage = false;
  GpuJobs* jobs = nullptr;
};

class SampleMap;

class SampleDecoder {
 public:
  // `upscales` (optional, indexed by field): counts the images scaled up.
  // `map`: the user's function, run on each sample once its fields are
  // decoded (pipeline/sample_map.h); null: none.
  explicit SampleDecoder(const BatchLayout* layout, UpscaleCounter* upscales = nullptr, SampleMap* map = nullptr)
      : layout_(layout), upscales_(upscales), map_(map) {}

  // `bytes` holds the sample's [entry.begin, entry.end) range of `shard`,
  // except `direct`: ranges the reader placed in their slots instead (see
  // direct_arrays.h). A field whose ranges verify needs no decode; one whose
  // do not gets its bytes back into `bytes` and decodes as usual.
  // `gpu` (device runs with GPU decode): see GpuSlot.
  Status Decode(const std::string& shard, SampleView entry, std::span<uint8_t> bytes,
                uint8_t* batch_buffer, int slot, uint64_t sample_seed, std::span<const DirectRange> direct = {},
                const GpuSlot* gpu = nullptr);

  // When the last Decode ran the map: [begin, end) on the NowNs clock, for the
  // caller's stage counters and spans; both 0 when it did not run.
  uint64_t map_begin_ns() const { return map_begin_ns_; }
  uint64_t map_end_ns() const { return map_end_ns_; }

 private:
  Status DecodeField(size_t f, const MemberView& member, std::span<const uint8_t> data, uint8_t* batch_buffer,
                     int slot, uint64_t seed, const GpuSlot* gpu);
  void NoteUpscale(size_t f, const ImageSpec& spec, uint64_t seed);
  Status DecodeVariableImage(const FieldLayout& field, std::span<const uint8_t> data, uint8_t* batch_buffer, int slot);
  Status DecodeNpz(const FieldLayout& field, std::span<const uint8_t> data, uint8_t* batch_buffer, int slot);

  const BatchLayout* layout_;
  UpscaleCounter* upscales_;
  SampleMap* map_;
  uint64_t map_begin_ns_ = 0, map_end_ns_ = 0;
  ImageDecoder image_;  // JPEG, PNG or WebP, by content
  std::vector<uint8_t> scratch_;
  GzipInflater gunzip_;  // ".gz" members (FieldLayout::gzip)
};

// Checks an .npy header against the shape the layout expects; copies it into out.
Status CopyCheckedNpy(std::span<const uint8_t> npy, const ArraySlot& slot, std::span<uint8_t> out);

}  // namespace stoker
