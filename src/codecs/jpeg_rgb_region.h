// codecs/jpeg_rgb_region.h — a rectangle of a JPEG decoded to RGB the way
// Pillow decodes the whole image (libjpeg: ISLOW IDCT, fancy upsampling,
// libjpeg's YCbCr->RGB), through the public libjpeg API: jpeg_crop_scanline
// for the columns, jpeg_skip_scanlines for the rows above, and no decode of
// the rows below when the stream ends with EOI (else they are entropy-decoded
// so a truncated file stays a DataLoss).
//
// Why: the Pillow-exact resample (resample.h) needs only the source rows and
// columns its filter reaches; the rest of the IDCT, upsampling and color
// conversion is skipped. At DCT scale 1/1 jpeg_raw_resample.h does this
// faster from raw planes; this path is for DCT-scaled decodes, RGB-coded
// JPEGs and what else that one does not take. The crop is widened by one iMCU on each side, so the
// fancy upsampler's edge handling never reaches a kept pixel: inside the
// rectangle the pixels equal a full decode's (jpeg_test.cc,
// ResampledRegionEqualsFullDecode).
// For YCbCr, RGB and grayscale JPEGs (gray comes out R=G=B, as Pillow's
// convert("RGB")); CMYK/YCCK take the full decode.
// Thread-safety: uses the caller's decompressor (one JpegDecoder's, one thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "codecs/decode_scratch.h"
#include "stoker/status.h"

namespace stoker {

struct LibJpeg;

struct RgbRegion {
  const uint8_t* data = nullptr;  // pixel (x0, y0) of the scaled image
  size_t stride = 0;              // bytes per row
  int x0 = 0, y0 = 0;             // where the decoded rectangle starts (<= the asked one)
};

// Decodes at least scaled pixels [x0, x1) x [y0, y1) at DCT scale 1/denom
// into `buf` (grown as needed, kept; 16 bytes of slack after the pixels).
Status DecodeRgbRegion(LibJpeg& lj, std::span<const uint8_t> jpeg, int denom, int x0, int x1, int y0, int y1,
                       ScratchBytes& buf, RgbRegion* region);

}  // namespace stoker
