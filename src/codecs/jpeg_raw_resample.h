// codecs/jpeg_raw_resample.h — the Pillow-exact decode+resample of a JPEG from
// raw planes: the IDCT on only the iMCUs the filter reaches (jpeg_raw_region.h),
// libjpeg's fancy upsampling and YCbCr->RGB redone row by row on only the
// columns it reads (jpeg_ycc_rows.h), each row resampled horizontally at once
// (resample.h's ResampleRgbRows), then the vertical pass.
//
// Why: the same pixels as libjpeg's full RGB decode + Pillow's resample
// (jpeg_test.cc: ResampledRegionEqualsFullDecode, RawRgbRectEqualsLibjpeg),
// without libjpeg's upsampling and conversion of columns nobody reads, and
// without a full-size RGB intermediate written and read back.
// For YCbCr/gray JPEGs in 4:2:0, 4:2:2, 4:4:4, 4:4:0 at DCT scale 1/1
// (YccRowsSupported); anything else returns false and the caller takes
// jpeg_rgb_region.h's libjpeg RGB decode.
// Thread-safety: uses the caller's decompressor and scratch (one thread's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/resample.h"
#include "stoker/status.h"

namespace stoker {

struct DecodeScratch;
struct LibJpeg;

// Where planar outputs go: output row i of channel c (ax.count bytes) at
// data + i row_stride + c plane (see ResampleRgbPlanarRows).
struct PlanarOut {
  uint8_t* data;
  size_t row_stride, plane;
};

enum class RawResampled { kNotHandled, kHwc, kPlanar };

// Decodes the source rectangle `plan` reaches (denom 1) and writes its
// ax.count x ay.count RGB outputs: to `planar` when the axis allows the
// planar resample (kPlanar), else as HWC to hwc (row stride hwc_stride,
// kHwc). kNotHandled: nothing written. Errors: DataLoss with libjpeg's
// message.
Result<RawResampled> DecodeRawResampled(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg,
                                        const GeometryResample& plan, PlanarOut planar, uint8_t* hwc,
                                        size_t hwc_stride);

// The building block, for tests: image pixels [x0, x1) x [y0, y1) as HWC RGB
// (rows 3 (x1 - x0) bytes apart) as libjpeg's full RGB decode gives them.
// simd false: the scalar row loops; planes: rows made as R, G, B planes
// (YccRows::RowPlanes, what the resample reads) and interleaved here.
// false: not handled.
Result<bool> DecodeRawRgbRect(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg, int x0, int x1,
                              int y0, int y1, bool simd, bool planes, uint8_t* dst);

}  // namespace stoker
