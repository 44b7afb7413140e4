// device/image_job.h — one image a GPU decoder decodes into a batch: where
// its compressed bytes are, the sample's geometry (codecs/sample_geometry.h,
// planned on a decode thread from the JPEG's header and the sample's seed,
// as the CPU path plans it), and where its output slot is. Plain data, the
// same on the host and in a kernel's arguments.
#pragma once

#include <cstdint>

namespace stoker {

// An image field's output, as the kernels write it (stoker/image_spec.h).
struct GpuOutputSpec {
  int height = 0, width = 0;
  int chw = 1;
  int float32 = 0;
  int filter = 0;      // codecs/resample_taps.h's Filter (ResizeMode::kNone plans identity axes)
  float mean[3] = {0, 0, 0};     // float32: (v / 255 - mean) * inv_std
  float inv_std[3] = {1, 1, 1};
};

struct ImageJob {
  // The compressed bytes: in the slot's own bytes of the batch's pinned host
  // buffer, or (larger than the slot) in a buffer the batch keeps beside it.
  const uint8_t* bytes = nullptr;
  uint32_t length = 0;
  int width = 0, height = 0;  // the JPEG's
  // codecs/sample_geometry.h's SampleGeometry, flattened.
  int crop_x = 0, crop_y = 0, crop_w = 0, crop_h = 0;
  int resized_w = 0, resized_h = 0;
  int win_x = 0, win_y = 0, win_w = 0, win_h = 0;
  int hflip = 0;
  uint64_t out_offset = 0;  // the output slot, in the batch buffer (host and device alike)
  int spec = 0;             // index of its field's GpuOutputSpec
  int slot = 0;             // its sample's slot in the batch (for messages)
};

}  // namespace stoker
