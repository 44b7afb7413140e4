// codecs/scaled_crop.cc — crop windows after DCT scaling (see header).
// Thread-safety: pure functions.
#include "codecs/scaled_crop.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace stoker {

ScaledPlan PlanScale(const ImageSpec& spec, const SampleGeometry& g, int width, int height) {
  ScaledPlan p;
  if (spec.mode != ResizeMode::kNone) {
    for (int d : {8, 4, 2}) {
      if (static_cast<int64_t>(g.crop_w) >= static_cast<int64_t>(g.resized_w) * d &&
          static_cast<int64_t>(g.crop_h) >= static_cast<int64_t>(g.resized_h) * d) {
        p.denom = d;
        break;
      }
    }
  }
  const tjscalingfactor sf{1, p.denom};
  p.sw = TJSCALED(width, sf);
  p.sh = TJSCALED(height, sf);
  // Crop in scaled pixels; the window is widened outward to whole pixels.
  p.cx0 = static_cast<int>(static_cast<int64_t>(g.crop_x) * p.sw / width);
  p.cy0 = static_cast<int>(static_cast<int64_t>(g.crop_y) * p.sh / height);
  const int cx1 = std::min<int>(p.sw, static_cast<int>((static_cast<int64_t>(g.crop_x + g.crop_w) * p.sw + width - 1) / width));
  const int cy1 = std::min<int>(p.sh, static_cast<int>((static_cast<int64_t>(g.crop_y + g.crop_h) * p.sh + height - 1) / height));
  p.cw = std::max(1, cx1 - p.cx0);
  p.ch = std::max(1, cy1 - p.cy0);
  return p;
}

PlaneWindow PlaneCrop(const ScaledPlan& p, int pw, int ph) {
  PlaneWindow win;
  win.x0 = static_cast<int>(static_cast<int64_t>(p.cx0) * pw / p.sw);
  win.y0 = static_cast<int>(static_cast<int64_t>(p.cy0) * ph / p.sh);
  const int x1 = std::min<int>(pw, static_cast<int>((static_cast<int64_t>(p.cx0 + p.cw) * pw + p.sw - 1) / p.sw));
  const int y1 = std::min<int>(ph, static_cast<int>((static_cast<int64_t>(p.cy0 + p.ch) * ph + p.sh - 1) / p.sh));
  win.w = std::max(1, x1 - win.x0);
  win.h = std::max(1, y1 - win.y0);
  return win;
}

void FillLumaPad(uint8_t* buf, int stride, int x0, int y0, int w, int h, int real_w, int real_h) {
  if (real_w > x0 && real_w < x0 + w) {
    for (int y = 0; y < h; ++y) {
      uint8_t* row = buf + static_cast<size_t>(y) * stride;
      std::memset(row + (real_w - x0), row[real_w - 1 - x0], static_cast<size_t>(x0 + w - real_w));
    }
  }
  if (real_h > y0) {
    for (int y = real_h; y < y0 + h; ++y) {
      std::memcpy(buf + static_cast<size_t>(y - y0) * stride, buf + static_cast<size_t>(real_h - 1 - y0) * stride,
                  static_cast<size_t>(w));
    }
  }
}

}  // namespace stoker
