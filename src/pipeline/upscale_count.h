// pipeline/upscale_count.h — how many of an image field's images came out
// larger than they went in (issue 44: a default image() silently turned
// 28x28 PNGs into 224x224). The decoders count each CPU-decoded image whose
// resize scales its source region up (SampleGeometry: resized past the
// crop on a side) and keep the first such source size; the Python package
// reads the counts once, at a pass's first batch, and warns when most
// images were upscaled, naming the field, the source size and the fix.
// Modes where it is no news are not counted: resize="none" (no resize) and
// random_resized_crop (its crops are scaled up by design).
// Thread-safety: Note from any decode thread (relaxed atomics); Read any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "pipeline/batch_layout.h"
#include "stoker/image_spec.h"
#include "stoker/tuning.h"

namespace stoker {

// What Read returns for one field.
struct UpscaleCounts {
  uint64_t images = 0;    // counted images (CPU decodes of a counted mode)
  uint64_t upscaled = 0;  // of them, scaled up
  int first_width = 0, first_height = 0;  // the first upscaled image's size (0: none yet)
};

class UpscaleCounter {
 public:
  explicit UpscaleCounter(size_t fields) : fields_(std::make_unique<Field[]>(fields)), size_(fields) {}

  static bool Counts(const ImageSpec& spec) {
    return spec.mode != ResizeMode::kNone && spec.mode != ResizeMode::kRandomResizedCrop;
  }
  void Note(size_t field, bool upscaled, int width, int height) {
    Field& f = fields_[field];
    f.images.fetch_add(1, std::memory_order_relaxed);
    if (!upscaled) return;
    f.upscaled.fetch_add(1, std::memory_order_relaxed);
    uint64_t none = 0;
    f.first.compare_exchange_strong(none, (uint64_t{static_cast<uint32_t>(width)} << 32) | static_cast<uint32_t>(height),
                                    std::memory_order_relaxed);
  }
  UpscaleCounts Read(size_t field) const {
    const Field& f = fields_[field];
    const uint64_t first = f.first.load(std::memory_order_relaxed);
    return {f.images.load(std::memory_order_relaxed), f.upscaled.load(std::memory_order_relaxed),
            static_cast<int>(first >> 32), static_cast<int>(first & 0xffffffffu)};
  }
  size_t size() const { return size_; }

 private:
  struct Field {
    std::atomic<uint64_t> images{0}, upscaled{0};
    std::atomic<uint64_t> first{0};  // width << 32 | height
  };
  std::unique_ptr<Field[]> fields_;
  size_t size_;
};

// The image fields' counts, for Loader::Settings (LoaderSettings::upscales).
inline void FillUpscales(const BatchLayout& layout, const UpscaleCounter* counter, LoaderSettings* s) {
  if (!counter) return;
  for (size_t f = 0; f < layout.fields.size() && f < counter->size(); ++f) {
    const FieldSpec& spec = layout.fields[f].spec;
    if (spec.kind != FieldKind::kImage || !UpscaleCounter::Counts(spec.image)) continue;
    const UpscaleCounts c = counter->Read(f);
    s->upscales.push_back({spec.field, c.images, c.upscaled, c.first_width, c.first_height, spec.image.height,
                           spec.image.width});
  }
}

}  // namespace stoker
