// codecs/sample_geometry.cc — crop/resize/flip planning (see header).
// Thread-safety: pure functions.
#include "codecs/sample_geometry.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace stoker {
namespace {

int RoundToInt(double v) { return PyRound(v); }

// torchvision's _compute_resized_output_size for Resize(S) (an int): the
// shorter side to S, the longer to int(S * long / short), truncated.
void ResizeShorter(int width, int height, int s, int* rw, int* rh) {
  const int shorter = std::min(width, height), longer = std::max(width, height);
  const int new_long = static_cast<int>(static_cast<double>(s) * longer / shorter);
  if (width <= height) {
    *rw = s;
    *rh = new_long;
  } else {
    *rw = new_long;
    *rh = s;
  }
}

// torchvision.transforms.RandomResizedCrop.get_params, with our PRNG in place
// of torch's: up to 10 tries of (area fraction, log-uniform aspect), then a
// center crop with the aspect clamped into `ratio`.
void RandomResizedCrop(const ImageSpec& spec, int width, int height, SplitMix64& rng,
                       SampleGeometry* g) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(static_cast<double>(spec.ratio[0]));
  const double log_hi = std::log(static_cast<double>(spec.ratio[1]));
  // (torchvision compares against min(ratio)/max(ratio); Validate orders them.)
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

int PyRound(double v) { return static_cast<int>(std::nearbyint(v)); }  // default mode: ties to even

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
        // Sizes read (H, W) everywhere, as image(size=(H, W)) takes them.
        // A data error (this image), not a bad argument: the loader names the sample.
        return FailedPrecondition("resize='none' keeps images as stored, so every image must be size=(" +
                                  std::to_string(spec.height) + ", " + std::to_string(spec.width) +
                                  ") (H, W); this one is (" + std::to_string(height) + ", " +
                                  std::to_string(width) + "): give its size, or resize it (resize='center_crop')");
      }
      break;
    case ResizeMode::kStretch:
      break;
    case ResizeMode::kShorterCenterCrop: {
      if (spec.resample != Resample::kBox) {
        // torchvision Resize(S) then CenterCrop((H, W)): resize the whole
        // image, keep the centered window (top = round((rh - H) / 2)).
        int s = spec.resize_to;
        int rw = 0, rh = 0;
        if (s == 0) {  // the smallest S whose Resize covers the output
          s = width <= height ? spec.width : spec.height;
          for (ResizeShorter(width, height, s, &rw, &rh); rw < spec.width || rh < spec.height;
               ResizeShorter(width, height, s, &rw, &rh)) {
            ++s;
          }
        }
        ResizeShorter(width, height, s, &rw, &rh);
        g.resized_w = rw;
        g.resized_h = rh;
        g.win_x = RoundToInt((rw - spec.width) / 2.0);
        g.win_y = RoundToInt((rh - spec.height) / 2.0);
        break;
      }
      // kBox: resize so the image covers the output (the shorter side meets it for
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
      // SAM's ResizeLongestSide.get_preprocess_shape: int(x * scale + 0.5).
      const double s = std::min(static_cast<double>(spec.width) / width,
                                static_cast<double>(spec.height) / height);
      g.resized_w = std::clamp(static_cast<int>(width * s + 0.5), 1, spec.width);
      g.resized_h = std::clamp(static_cast<int>(height * s + 0.5), 1, spec.height);
      break;
    }
    case ResizeMode::kRandomResizedCrop:
      RandomResizedCrop(spec, width, height, rng, &g);
      break;
  }
  g.win_w = std::min(g.resized_w - g.win_x, spec.width);
  g.win_h = std::min(g.resized_h - g.win_y, spec.height);
  return g;
}

}  // namespace stoker
