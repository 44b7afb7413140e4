// codecs/jpeg_raw_region.h — raw (planar: not upsampled, not color-converted)
// decode of a rectangle of iMCUs of one JPEG through the libjpeg API: the
// IDCT runs only on the iMCU rows and columns asked for.
//
// Shared by the two region paths: the box path (jpeg_region.h: planes ->
// libyuv resize) and the Pillow-exact path (jpeg_raw_resample.h: planes ->
// libjpeg's own fancy upsampling and YCbCr->RGB, redone bit for bit, -> the
// antialiased resample). For YCbCr or gray JPEGs in 4:4:4, 4:2:2, 4:2:0,
// 4:4:0, baseline or progressive, on libjpeg-turbo 2.1.x (see the .cc for
// how and why it uses libjpeg internals); elsewhere RawRegionSupported() is
// false and callers take their other path.
// Usage: AbortOnExit, ReadRawHeader, StartRaw, DecodeRawImcus, in that order,
// on one decompressor.
// Thread-safety: uses the caller's decompressor and scratch (one thread's).
#pragma once

#include <cstdint>
#include <span>

#include "stoker/status.h"

namespace stoker {

struct DecodeScratch;
struct LibJpeg;

// Whether this build can decode raw regions at all (libjpeg-turbo 2.1.x with
// jpegint.h). When false, every call below returns "not handled".
bool RawRegionSupported();

// The layout StartRaw found: sizes in pixels of the image decoded at its DCT
// scale, and how an iMCU maps onto each plane.
struct RawLayout {
  int subsamp = -1;         // TJSAMP_* (gray, 444, 422, 420, 440)
  int ncomp = 0;            // 1 or 3
  int width = 0, height = 0;  // scaled image (libjpeg's output_width/height)
  int dct = 8;              // scaled block size (8 / denom)
  int align = 8;            // scaled luma columns per iMCU column
  int hs[3] = {1, 1, 1}, vs[3] = {1, 1, 1};  // plane c: an iMCU is hs*dct x vs*dct pixels
  int total_rows = 0;       // iMCU rows
  // The plane sizes libjpeg counts as real (downsampled_width/height):
  // its upsampler's edge rule replicates the last of these.
  int plane_w[3] = {}, plane_h[3] = {};
};

// The decoded iMCUs: plane c's pixel (x0[c], y0[c]) (plane coordinates) is
// at plane[c], rows stride[c] bytes apart, w[c] x h[c] pixels decoded.
struct RawPlanes {
  uint8_t* plane[3] = {};
  int stride[3] = {};
  int x0[3] = {}, y0[3] = {};
  int w[3] = {}, h[3] = {};
};

// Reads the header. Returns the TJSAMP_* layout, or -1 for a JPEG the raw
// path does not take (CMYK, RGB-coded, 4:1:1, ...). Errors: DataLoss.
Result<int> ReadRawHeader(LibJpeg& lj, std::span<const uint8_t> jpeg);

// Starts the raw decode at DCT scale 1/denom. false: a layout this code does
// not know at that scale (the caller takes its other path).
Result<bool> StartRaw(LibJpeg& lj, int subsamp, int denom, RawLayout* layout);

// Decodes iMCU rows [row0, row1] and columns [col0, col1] (clamped to the
// image by the caller) into scratch.decoded. Reads the stream to its end
// when it does not end with EOI (a truncated file is a DataLoss).
Status DecodeRawImcus(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg, const RawLayout& layout,
                      int col0, int col1, int row0, int row1, RawPlanes* planes);

}  // namespace stoker
