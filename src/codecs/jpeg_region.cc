// codecs/jpeg_region.cc — region decode through the libjpeg API (see header).
//
// Path: header -> PlanSample (crop, size, flip) -> DCT scale 1/8..1/2 when
// the scaled crop stays >= the output -> raw (planar, not upsampled, not
// color-converted) decode of only the iMCU rows and columns that hold the
// crop: rows above it are entropy-decoded without IDCT, columns beside it
// get no IDCT, rows below it are not read when the stream ends with EOI
// (else entropy-decoded to catch a truncation; see MustReadToEnd) -> crop
// each plane by pointer offset -> ResizePlane each plane (chroma keeps its
// subsampling, so it costs a quarter of luma) -> one small full-range
// BT.601 YCbCr->RGB at output size with bilinear chroma upsampling
// (libyuv, "JPEG" matrix) -> layout/dtype/flip/pad into the caller's slot.
// Its planes are the ones tjDecompressToYUVPlanes gives for the same pixels
// (same ISLOW IDCT per block, the same 4:2:0 chroma-scaling override), so the
// output equals the TurboJPEG path's bit for bit (jpeg_test.cc,
// RegionDecodeEqualsFullPlanePath).
// The raw iMCU decode itself (and why it needs libjpeg internals) is
// jpeg_raw_region.h, shared with the Pillow-exact path.
// Measured (bench/decode_bench.cc 500 7 cpu: 500x375 q90 4:2:0, 1 thread,
// thread CPU time, region vs TurboJPEG path in one run, median of 7):
// 224 center crop +5%, random resized crop 224 +21% (u8 and f32),
// 1500x1000 -> longest 1024 (nothing cropped) +1%, within noise.
// Thread-safety: see header.
#include "codecs/jpeg_region.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstddef>
#include <limits>

#include "codecs/decode_scratch.h"
#include "codecs/jpeg_raw_region.h"
#include "codecs/libjpeg_decompressor.h"
#include "codecs/pixel_output.h"
#include "codecs/sample_geometry.h"
#include "codecs/scaled_crop.h"

namespace stoker {

Result<bool> DecodeRegion(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg,
                          const ImageSpec& spec, uint64_t sample_seed, std::span<uint8_t> out) {
  if (!lj.ok || !RawRegionSupported()) return false;
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  jpeg_decompress_struct& ci = lj.cinfo;
  AbortOnExit reset{&ci};
  STOKER_ASSIGN_OR_RETURN(const int subsamp, ReadRawHeader(lj, jpeg));
  if (subsamp < 0) return false;
  const int width = static_cast<int>(ci.image_width), height = static_cast<int>(ci.image_height);
  if (width <= 0 || height <= 0) return DataLoss("JPEG has no pixels");
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, width, height, sample_seed));
  const ScaledPlan p = PlanScale(spec, g, width, height);
  RawLayout l;
  STOKER_ASSIGN_OR_RETURN(const bool started, StartRaw(lj, subsamp, p.denom, &l));
  if (!started || l.width != p.sw || l.height != p.sh) return false;

  const int ncomp = l.ncomp, dct = l.dct;
  PlaneWindow win[3];
  int col0 = std::numeric_limits<int>::max(), col1 = 0, row0 = std::numeric_limits<int>::max(), row1 = 0;
  for (int c = 0; c < ncomp; ++c) {
    win[c] = PlaneCrop(p, tjPlaneWidth(c, p.sw, subsamp), tjPlaneHeight(c, p.sh, subsamp));
    const int uw = l.hs[c] * dct, uh = l.vs[c] * dct;
    col0 = std::min(col0, win[c].x0 / uw);
    col1 = std::max(col1, (win[c].x0 + win[c].w - 1) / uw);
    row0 = std::min(row0, win[c].y0 / uh);
    row1 = std::max(row1, (win[c].y0 + win[c].h - 1) / uh);
  }
  if (row1 >= l.total_rows || static_cast<int64_t>(col1) * l.align >= p.sw) return false;  // cannot happen
  RawPlanes planes;
  STOKER_RETURN_IF_ERROR(DecodeRawImcus(lj, scratch, jpeg, l, col0, col1, row0, row1, &planes));
  const uint8_t* src[3] = {};
  int stride[3] = {};
  for (int c = 0; c < ncomp; ++c) {
    // The decoded window starts at iMCU (col0, row0); the crop sits inside it.
    src[c] = planes.plane[c] + static_cast<size_t>(win[c].y0 - planes.y0[c]) * planes.stride[c] +
             (win[c].x0 - planes.x0[c]);
    stride[c] = planes.stride[c];
  }
  FillLumaPad(planes.plane[0], planes.stride[0], planes.x0[0], planes.y0[0], planes.w[0],
              planes.h[0], DecodedLuma(width, p.denom), DecodedLuma(height, p.denom));

  const int rw = g.resized_w, rh = g.resized_h;
  const size_t rplane = static_cast<size_t>(rw) * rh;
  uint8_t* res = Grow(scratch.resized, rplane * 3);
  uint8_t* out_rgb = Grow(scratch.rgb, rplane * 3);
  PlanesToRgb(src, stride, win, ncomp, subsamp, rw, rh, res, out_rgb);
  WriteOutput(out_rgb, rw, rh, spec, g.hflip, out);
  return true;
}

}  // namespace stoker
