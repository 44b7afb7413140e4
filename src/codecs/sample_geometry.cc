// codecs/sample_geometry.cc — crop/resize/flip planning (see header).
// Thread-safety: pure functions.
#include "codecs/sample_geometry.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace stoker {
namespace {

int RoundToInt(double v) { return static_cast<int>(std::lround(v)); }

// torchvision.transforms.RandomResizedCrop.get_params, with our PRNG in place
// of torch's: up to 10 tries of (area fraction, log-uniform aspect), then a
// center crop with the aspect clamped into `ratio`.
void RandomResizedCrop(const ImageSpec& spec, int width, int height, SplitMix64& rng,
                       SampleGeometry* g) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(static_cast<double>(spec.ratio[0]));
  const double log_hi = std::log(static_cast<double>(spec.ratio[1]));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(spec.scale[0], spec.scale[1]);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = RoundToInt(std::sqrt(target_area * aspect));
    const int h = RoundToInt(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      g->crop_y = static_cast<int>(rng.RandInt(0, height - h));
      g->crop_x = static_cast<int>(rng.RandInt(0, width - w));
      g->crop_w = w;
      g->crop_h = h;
      return;
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < spec.ratio[0]) {
    h = std::clamp(RoundToInt(w / static_cast<double>(spec.ratio[0])), 1, height);
  } else if (in_ratio > spec.ratio[1]) {
    w = std::clamp(RoundToInt(h * static_cast<double>(spec.ratio[1])), 1, width);
  }
  g->crop_x = (width - w) / 2;
  g->crop_y = (height - h) / 2;
  g->crop_w = w;
  g->crop_h = h;
}

}  // namespace

Result<SampleGeometry> PlanSample(const ImageSpec& spec, int width, int height, uint64_t sample_seed) {
  if (width <= 0 || height <= 0) return DataLoss("image has no pixels");
  SampleGeometry g;
  SplitMix64 rng(sample_seed);
  // The flip is the first draw, so it does not depend on how many crop tries
  // the same seed needed.
  const uint64_t flip_bits = rng.Next();
  g.hflip = spec.random_hflip && (flip_bits >> 63) != 0;
  g.crop_w = width;
  g.crop_h = height;
  g.resized_w = spec.width;
  g.resized_h = spec.height;
  switch (spec.mode) {
    case ResizeMode::kNone:
      if (width != spec.width || height != spec.height) {
        return InvalidArgument("resize mode 'none' needs every image to be " + std::to_string(spec.width) +
                               "x" + std::to_string(spec.height) + " (WxH), got " +
                               std::to_string(width) + "x" + std::to_string(height));
      }
      break;
    case ResizeMode::kStretch:
      break;
    case ResizeMode::kShorterCenterCrop: {
      // Resize so the image covers the output (the shorter side meets it for
      // a square output), then keep the centered window. Done as a crop of
      // the source first so only the kept pixels are resized.
      const double s = std::max(static_cast<double>(spec.width) / width,
                                static_cast<double>(spec.height) / height);
      g.crop_w = std::clamp(RoundToInt(spec.width / s), 1, width);
      g.crop_h = std::clamp(RoundToInt(spec.height / s), 1, height);
      g.crop_x = (width - g.crop_w) / 2;
      g.crop_y = (height - g.crop_h) / 2;
      break;
    }
    case ResizeMode::kLongestPad: {
      const double s = std::min(static_cast<double>(spec.width) / width,
                                static_cast<double>(spec.height) / height);
      g.resized_w = std::clamp(RoundToInt(width * s), 1, spec.width);
      g.resized_h = std::clamp(RoundToInt(height * s), 1, spec.height);
      break;
    }
    case ResizeMode::kRandomResizedCrop:
      RandomResizedCrop(spec, width, height, rng, &g);
      break;
  }
  return g;
}

}  // namespace stoker
