// codecs/jpeg_raw_resample.cc — raw planes -> libjpeg-exact RGB rows ->
// Pillow resample (see header).
// Thread-safety: see header.
#include "codecs/jpeg_raw_resample.h"

#include <algorithm>
#include <vector>

#include "codecs/decode_scratch.h"
#include "codecs/jpeg_raw_region.h"
#include "codecs/jpeg_ycc_rows.h"
#include "codecs/libjpeg_decompressor.h"

namespace stoker {
namespace {

// Header, start at 1/1, decode the iMCUs rows [y0, y1) x columns [x0, x1)
// need, and set up the row maker. false: not handled.
Result<bool> StartRows(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg, int x0, int x1, int y0,
                       int y1, bool simd) {
  if (!lj.ok || !RawRegionSupported()) return false;
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  STOKER_ASSIGN_OR_RETURN(const int subsamp, ReadRawHeader(lj, jpeg));
  if (subsamp < 0) return false;
  RawLayout l;
  STOKER_ASSIGN_OR_RETURN(const bool started, StartRaw(lj, subsamp, 1, &l));
  if (!started || !YccRowsSupported(l)) return false;
  if (x0 < 0 || y0 < 0 || x1 > l.width || y1 > l.height || x0 >= x1 || y0 >= y1) return false;
  int col0, col1, row0, row1;
  YccRowsImcus(l, x0, x1, y0, y1, &col0, &col1, &row0, &row1);
  RawPlanes planes;
  STOKER_RETURN_IF_ERROR(DecodeRawImcus(lj, scratch, jpeg, l, col0, col1, row0, row1, &planes));
  scratch.ycc_rows.Init(l, planes, x0, x1, simd);
  return true;
}

struct RowJob {
  YccRows* rows;
  uint8_t* buf;
  int y_offset;  // image row = axis row + y_offset
};

const uint8_t* MakeRow(void* ctx, int y) {
  RowJob& j = *static_cast<RowJob*>(ctx);
  j.rows->Row(y + j.y_offset, j.buf);
  return j.buf;
}

struct PlanesJob {
  YccRows* rows;
  uint8_t* buf;
  size_t plane_stride;
  int y_offset;
};

const uint8_t* MakePlanes(void* ctx, int y) {
  PlanesJob& j = *static_cast<PlanesJob*>(ctx);
  return j.rows->RowPlanes(y + j.y_offset, j.buf, j.plane_stride);
}

}  // namespace

Result<RawResampled> DecodeRawResampled(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg,
                                        const GeometryResample& plan, PlanarOut planar, uint8_t* hwc,
                                        size_t hwc_stride) {
  const ResampleAxis &ax = plan.ax, &ay = plan.ay;
  if (ax.src_hi <= ax.src_lo || ay.src_hi <= ay.src_lo) return RawResampled::kNotHandled;
  // Axis pixel v is image pixel v - src_x0 (plan.src_x0 is the image's (0,0)).
  const int x0 = ax.src_lo - plan.src_x0, x1 = ax.src_hi - plan.src_x0;
  const int y0 = ay.src_lo - plan.src_y0, y1 = ay.src_hi - plan.src_y0;
  AbortOnExit reset{&lj.cinfo};
  STOKER_ASSIGN_OR_RETURN(const bool started, StartRows(lj, scratch, jpeg, x0, x1, y0, y1, true));
  if (!started) return RawResampled::kNotHandled;
  const size_t slack = std::max(ResampleRowSlack(ax), YccRows::kSlack);
  if (ax.planar) {
    // One channel per row of the horizontal pass: no interleaving either way.
    YccRows& rows = scratch.ycc_rows;
    const size_t plane_stride = rows.gray() ? 0 : static_cast<size_t>(x1 - x0) + slack;
    uint8_t* buf = Grow(scratch.ycc_row, 3 * (static_cast<size_t>(x1 - x0) + slack));
    PlanesJob job{&rows, buf, plane_stride, -plan.src_y0};
    ResampleRgbPlanarRows(ax, ay, MakePlanes, &job, plane_stride, planar.data, planar.row_stride, planar.plane,
                          &scratch.resample_tmp);
    return RawResampled::kPlanar;
  }
  const size_t row_bytes = static_cast<size_t>(x1 - x0) * 3;
  uint8_t* buf = Grow(scratch.ycc_row, row_bytes + slack);
  RowJob job{&scratch.ycc_rows, buf, -plan.src_y0};
  ResampleRgbRows(ax, ay, MakeRow, &job, hwc, hwc_stride, &scratch.resample_tmp);
  return RawResampled::kHwc;
}

Result<bool> DecodeRawRgbRect(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg, int x0, int x1,
                              int y0, int y1, bool simd, bool planes, uint8_t* dst) {
  AbortOnExit reset{&lj.cinfo};
  STOKER_ASSIGN_OR_RETURN(const bool started, StartRows(lj, scratch, jpeg, x0, x1, y0, y1, simd));
  if (!started) return false;
  const int n = x1 - x0;
  const size_t row_bytes = static_cast<size_t>(n) * 3;
  YccRows& rows = scratch.ycc_rows;
  const size_t plane_stride = rows.gray() ? 0 : static_cast<size_t>(n) + YccRows::kSlack;
  uint8_t* buf = Grow(scratch.ycc_row, 3 * (static_cast<size_t>(n) + YccRows::kSlack));
  for (int y = y0; y < y1; ++y) {
    uint8_t* d = dst + static_cast<size_t>(y - y0) * row_bytes;
    if (!planes) {
      rows.Row(y, buf);
      std::copy(buf, buf + row_bytes, d);
      continue;
    }
    const uint8_t* r = rows.RowPlanes(y, buf, plane_stride);
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < 3; ++c) d[3 * i + c] = r[c * plane_stride + i];
    }
  }
  return true;
}

}  // namespace stoker
