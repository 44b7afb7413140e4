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
  // A plane is the image at 1/1 (luma, 4:4:4 chroma) or 1/2 (subsampled
  // chroma) per axis, padded to whole MCUs. The factor must come from the
  // subsampling, not from pw / sw: a luma plane padded from 375 to 376 rows
  // would otherwise make a 376-row window, resized onto 375 rows, and drift
  // the picture by up to a row from top to bottom.
  const int dx = (p.sw + pw - 1) / pw, dy = (p.sh + ph - 1) / ph;
  PlaneWindow win;
  win.x0 = p.cx0 / dx;
  win.y0 = p.cy0 / dy;
  const int x1 = std::min(pw, (p.cx0 + p.cw + dx - 1) / dx);
  const int y1 = std::min(ph, (p.cy0 + p.ch + dy - 1) / dy);
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
