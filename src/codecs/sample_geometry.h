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
  // Source region, in full-resolution pixels of the decoded image: the image
  // the resize sees (the whole image except for random_resized_crop, whose
  // crop torchvision takes before resizing; and kBox center_crop, below).
  int crop_x = 0, crop_y = 0, crop_w = 0, crop_h = 0;
  // Size the region is resized to.
  int resized_w = 0, resized_h = 0;
  // The output is the resized image's pixels [win_x, win_x + win_w) x
  // [win_y, win_y + win_h), at the output's top-left corner. The window is the
  // output size except for kLongestPad (the rest is zero padding). For
  // center_crop it is torchvision's CenterCrop of the resized image.
  int win_x = 0, win_y = 0, win_w = 0, win_h = 0;
  bool hflip = false;  // mirror the output region left-right
};

// Python's round() (half to even), as torchvision's arithmetic uses it.
int PyRound(double v);

// `spec` must be valid. kNone requires the image to be exactly spec's size.
// Geometry is torchvision's for each mode (Resize+CenterCrop, Resize((h,w)),
// RandomResizedCrop.get_params + resized_crop, SAM's ResizeLongestSide + pad),
// except that Resample::kBox center_crop keeps its older approximation: the
// centered source window (win = whole output) resized alone.
Result<SampleGeometry> PlanSample(const ImageSpec& spec, int image_width, int image_height,
                                  uint64_t sample_seed);

}  // namespace stoker
