// codecs/sample_geometry.h — where one sample's pixels come from and go to:
// the source region to keep, the size it is resized to, and the flip, as a
// pure function of the spec, the image size and the sample's seed.
//
// Kept apart from the decoder so the random crop is testable without JPEGs
// and so every decoder (JPEG now, PNG later) crops the same way.
// Random draws come from core/random.h's SplitMix64 seeded with the sample's
// seed: the flip first, then the crop's tries.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "stoker/image_spec.h"
#include "core/random.h"
#include "stoker/status.h"

namespace stoker {

struct SampleGeometry {
  // Source region, in full-resolution pixels of the decoded image.
  int crop_x = 0, crop_y = 0, crop_w = 0, crop_h = 0;
  // Size the region is resized to; it lands at the output's top-left corner.
  // Equal to the output size except for kLongestPad (the rest is zero padding).
  int resized_w = 0, resized_h = 0;
  bool hflip = false;  // mirror the resized region left-right
};

// `spec` must be valid. kNone requires the image to be exactly spec's size.
Result<SampleGeometry> PlanSample(const ImageSpec& spec, int image_width, int image_height,
                                  uint64_t sample_seed);

}  // namespace stoker
