// codecs/jpeg_ycc_rows.h — RGB rows exactly as libjpeg-turbo 2.1 decodes them
// to RGB by default (what Pillow gets: fancy upsampling, jdcolor.c's
// YCbCr->RGB), made from raw planes (jpeg_raw_region.h) one row at a time.
//
// Why: the Pillow-exact path needs RGB, but libjpeg's own RGB decode upsamples
// and converts whole rows of its crop and writes them out before the resample
// reads them back. Redone here on just the columns the resample reads, each
// row is made in L1 and consumed at once (jpeg_raw_resample.h).
// Arithmetic (libjpeg-turbo 2.1.5 jdsample.c, jdcolor.c; its SIMD versions are
// bit-exact with these):
// - h2v2 (4:2:0) "triangle" filter: colsum = 3 nearer row + further row;
//   even x: (3 colsum[j] + colsum[j-1] + 8) >> 4, odd: (3 colsum[j] +
//   colsum[j+1] + 7) >> 4. h2v1 (4:2:2): (3 c[j] + c[j-1] + 1) >> 2 and
//   (3 c[j] + c[j+1] + 2) >> 2. h1v2 (4:4:0): (3 nearer + further + 1 above /
//   2 below) >> 2. At the image's edges the missing neighbour is the edge
//   sample itself (libjpeg's first/last column cases and its replicated
//   context rows), at downsampled_width/height, not at the block padding.
// - YCbCr->RGB: R = y + round(1.402 (cr-128)), B = y + round(1.772 (cb-128)),
//   G = y + ((-22554 (cb-128) - 46802 (cr-128) + 32768) >> 16), clamped.
// Only at DCT scale 1/1 (libjpeg has no fancy upsampling below that, and
// IDCT-scales 4:2:0 chroma instead) and, for h2 layouts, chroma wider than 2
// samples (libjpeg's condition for the fancy filter).
// Speed: AVX2 for the upsampling and the conversion, chosen at run time;
// scalar otherwise. Same integers either way (jpeg_ycc_rows_test.cc).
// Thread-safety: a YccRows belongs to one thread; the free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/jpeg_raw_region.h"

namespace stoker {

// Whether rows can be made for this raw layout (see above).
bool YccRowsSupported(const RawLayout& l);

// The iMCU columns [*col0, *col1] and rows [*row0, *row1] a raw decode must
// hold for RGB rows [y0, y1) x columns [x0, x1) (the chroma upsampler's
// neighbours included). The rectangle must lie inside the image.
void YccRowsImcus(const RawLayout& l, int x0, int x1, int y0, int y1, int* col0, int* col1, int* row0, int* row1);

class YccRows {
 public:
  // Bytes Row may write past a row's 3 (x1 - x0).
  static constexpr size_t kSlack = 128;

  // `p` holds at least YccRowsImcus(l, x0, x1, ...) of a raw decode with layout l.
  // simd false: the scalar loops only (tests compare the two).
  void Init(const RawLayout& l, const RawPlanes& p, int x0, int x1, bool simd = true);

  // RGB of image row y, columns [x0, x1), to dst.
  void Row(int y, uint8_t* dst);

  // The same row as R, G, B planes: R at the returned pointer, G and B
  // plane_stride and 2 plane_stride bytes after it. Written to dst (3 planes
  // of x1 - x0 bytes); a gray image returns its luma row instead, readable
  // for 15 bytes past x1, and wants plane_stride 0.
  const uint8_t* RowPlanes(int y, uint8_t* dst, size_t plane_stride);
  bool gray() const { return l_.ncomp == 1; }

 private:
  const uint8_t* Luma(int y) const;
  void Chroma(int y, const uint8_t* ch[2]);  // upsampled Cb, Cr at column x0
  RawLayout l_;
  RawPlanes p_;
  int x0_ = 0, x1_ = 0;
  int ja_ = 0, jb_ = 0;  // chroma columns the row reads (h2 layouts)
  bool simd_ = true;
  std::vector<int16_t> colsum_;
  std::vector<uint8_t> up_[2];
};

// jdcolor.c's YCbCr->RGB of n pixels (HWC RGB out). simd false: scalar only.
void YccToRgbRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb, bool simd = true);
// The same conversion into R, G, B planes.
void YccToRgbPlanes(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* r, uint8_t* g, uint8_t* b,
                    bool simd = true);

}  // namespace stoker
