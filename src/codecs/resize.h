// codecs/resize.h — antialiased resize of one 8-bit plane (Y, Cb, Cr or R/G/B).
//
// Why planes: the JPEG path resizes the decoder's YCbCr planes before color
// conversion, so the full-resolution image is never upsampled or converted.
// Why libyuv: its box/bilinear scalers are SIMD with runtime CPU dispatch, so
// the build needs no -mavx2 and still uses the machine's widest vectors.
// Filter: shrinking uses libyuv's box filter (an average over every source
// pixel under the output pixel: antialiased); within 2x it uses libyuv's
// bilinear which, shrinking, still averages the covered pixels along each
// axis; growing is bilinear. Close to, not equal to, Pillow's BILINEAR with
// reducing (a triangle of support `scale`); the measured gap is in
// tests/cpp/codecs/jpeg_test.cc.
// Thread-safety: pure function; no state.
#pragma once

#include <cstdint>

namespace stoker {

void ResizePlane(const uint8_t* src, int src_stride, int src_width, int src_height, uint8_t* dst,
                 int dst_stride, int dst_width, int dst_height);

}  // namespace stoker
