// codecs/rgb_window.cc — interleaved RGB window -> output slot (see header).
// Thread-safety: see header.
#include "codecs/rgb_window.h"

#include <libyuv.h>

#include <cstddef>
#include <string>

#include "codecs/pixel_output.h"
#include "codecs/resample.h"
#include "codecs/resize.h"
#include "codecs/sample_geometry.h"

namespace stoker {

void RgbWindowToOutput(const uint8_t* rgb, const ScaledPlan& p, int rw, int rh, const ImageSpec& spec,
                       bool hflip, DecodeScratch& scratch, std::span<uint8_t> out) {
  if (spec.mode == ResizeMode::kNone) {
    WriteOutput(rgb, rw, rh, spec, hflip, out);
    return;
  }
  const int sw = p.sw, sh = p.sh;
  const size_t full = static_cast<size_t>(sw) * sh;
  const size_t rplane = static_cast<size_t>(rw) * rh;
  uint8_t* res = Grow(scratch.resized, rplane * 3);
  uint8_t* out_rgb = Grow(scratch.rgb, rplane * 3);
  uint8_t* pr = Grow(scratch.planes, full * 3);  // R | G | B planes
  libyuv::SplitRGBPlane(rgb, sw * 3, pr, sw, pr + full, sw, pr + 2 * full, sw, sw, sh);
  for (int c = 0; c < 3; ++c) {
    ResizePlane(pr + c * full + static_cast<size_t>(p.cy0) * sw + p.cx0, sw, p.cw, p.ch, res + c * rplane, rw, rw,
                rh);
  }
  libyuv::MergeRGBPlane(res, rw, res + rplane, rw, res + 2 * rplane, rw, out_rgb, rw * 3, rw, rh);
  WriteOutput(out_rgb, rw, rh, spec, hflip, out);
}

Status FullRgbToOutput(const uint8_t* rgb, int width, int height, const ImageSpec& spec, uint64_t sample_seed,
                       DecodeScratch& scratch, std::span<uint8_t> out) {
  STOKER_RETURN_IF_ERROR(spec.Validate());
  if (out.size() != spec.OutputBytes()) {
    return InvalidArgument("output slot has " + std::to_string(out.size()) + " bytes, spec needs " +
                           std::to_string(spec.OutputBytes()));
  }
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, width, height, sample_seed));
  if (spec.resample != Resample::kBox && spec.mode != ResizeMode::kNone) {
    // Pillow-exact: the same resample as JPEG's default path, at 1/1.
    GeometryResample plan;
    PlanGeometryResample(g, spec.resample, 1, width, height, &plan);
    uint8_t* out_rgb = Grow(scratch.rgb, static_cast<size_t>(g.win_w) * g.win_h * 3);
    ResampleRgb(plan.ax, plan.ay, rgb, static_cast<size_t>(width) * 3, plan.src_x0, plan.src_y0, out_rgb,
                static_cast<size_t>(g.win_w) * 3, &scratch.resample_tmp);
    WriteOutput(out_rgb, g.win_w, g.win_h, spec, g.hflip, out);
    return Status::Ok();
  }
  ScaledPlan p;  // 1/1: the crop window is the sample's crop
  p.sw = width;
  p.sh = height;
  p.cx0 = g.crop_x;
  p.cy0 = g.crop_y;
  p.cw = g.crop_w;
  p.ch = g.crop_h;
  RgbWindowToOutput(rgb, p, g.resized_w, g.resized_h, spec, g.hflip, scratch, out);
  return Status::Ok();
}

}  // namespace stoker
