// codecs/sample_geometry.h — where one sample's pixels come from and go to:
// the source region to keep, the size it is resized to, and the flip, as a
// pure function of the spec, the image size and the sample's seed.
//
// Kept apart from the decoder so the random crop is testable without JPEGs
// and so every decoder (JPEG now, PNG later) crops the same way.
// Thread-safety: pure functions; SplitMix64 is a value owned by its caller.
#pragma once

#include <cstdint>

#include "codecs/image_spec.h"
#include "stoker/status.h"

namespace stoker {

// Small, fast, well-mixed PRNG (Steele et al., used to seed xoshiro). The same
// seed gives the same sequence on every thread and platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [lo, hi] (inclusive); hi >= lo.
  int64_t RandInt(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(Next() % span);  // bias < span / 2^64: irrelevant here
  }

 private:
  uint64_t state_;
};

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
