// codecs/scaled_crop.h — where a sample's crop lands in a JPEG decoded at a
// DCT scale, in the scaled image and in each of its planes.
//
// Both decode paths (region, jpeg_region.cc; TurboJPEG, jpeg.cc) take their
// crop from here, so they crop the same pixels: that is what lets the region
// path equal the full-plane path bit for bit.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "stoker/image_spec.h"
#include "codecs/sample_geometry.h"

namespace stoker {

struct ScaledPlan {
  int denom = 1;                         // DCT scale 1/denom
  int sw = 0, sh = 0;                    // scaled image size
  int cx0 = 0, cy0 = 0, cw = 0, ch = 0;  // crop window in scaled pixels
};

// Picks the DCT scale: the largest of 1/8, 1/4, 1/2 whose scaled crop still
// holds at least the output pixels (so we only ever shrink after it), 1/1
// for mode kNone. Other factors (5/8, 3/4...) have no SIMD IDCT here and
// lose to a full decode.
ScaledPlan PlanScale(const ImageSpec& spec, const SampleGeometry& g, int width, int height);

// The crop window in one plane's own pixels (pw x ph: chroma planes are
// smaller by the subsampling factor).
struct PlaneWindow {
  int x0 = 0, y0 = 0, w = 1, h = 1;
};

PlaneWindow PlaneCrop(const ScaledPlan& p, int pw, int ph);

// tjPlaneWidth/Height round an odd luma size up to the chroma factor (a
// 63-pixel-wide 4:2:0 image has a 64-pixel luma plane). At DCT scale 1/8 a
// block is one pixel, so that pad column/row is a dummy block nobody decodes
// (TurboJPEG leaves its scratch there; the region buffer holds an earlier
// image), yet a crop window at the edge reaches it. Both paths define it as a
// copy of the last decoded column/row. `buf` holds luma pixels [x0, x0+w) x
// [y0, y0+h); real_w/real_h are the decoded extent (>= the plane at 1/2..1/1).
void FillLumaPad(uint8_t* buf, int stride, int x0, int y0, int w, int h, int real_w, int real_h);

// Decoded luma extent at DCT scale 1/denom: whole 8x8 blocks, each scaled.
inline int DecodedLuma(int size, int denom) { return (size + 7) / 8 * (8 / denom); }

}  // namespace stoker
