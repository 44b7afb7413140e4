// device/image_job_plan.cc — see image_job_plan.h.
#include "device/image_job_plan.h"

#include "codecs/resample_taps.h"

namespace stoker {

GpuOutputSpec OutputSpecOf(const ImageSpec& spec) {
  GpuOutputSpec s;
  s.height = spec.height;
  s.width = spec.width;
  s.chw = spec.chw ? 1 : 0;
  s.float32 = spec.pixel == PixelType::kFloat32 ? 1 : 0;
  s.filter = spec.resample == Resample::kBicubic ? taps::kBicubic : taps::kBilinear;
  for (int c = 0; c < 3; ++c) {
    s.mean[c] = spec.normalize ? spec.mean[c] : 0.0f;
    s.inv_std[c] = spec.normalize ? 1.0f / spec.std[c] : 1.0f;
  }
  return s;
}

ImageJob JobOf(const SampleGeometry& g, int width, int height) {
  ImageJob j;
  j.width = width;
  j.height = height;
  j.crop_x = g.crop_x;
  j.crop_y = g.crop_y;
  j.crop_w = g.crop_w;
  j.crop_h = g.crop_h;
  j.resized_w = g.resized_w;
  j.resized_h = g.resized_h;
  j.win_x = g.win_x;
  j.win_y = g.win_y;
  j.win_w = g.win_w;
  j.win_h = g.win_h;
  j.hflip = g.hflip ? 1 : 0;
  return j;
}

}  // namespace stoker
