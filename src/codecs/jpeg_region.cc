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
// Why libjpeg internals: the public API cannot crop or skip in raw mode
// (jpeg_crop_scanline and jpeg_skip_scanlines refuse DSTATE_RAW_OK), and raw
// mode is what keeps chroma subsampled and unconverted. So the crop is set in
// the decompressor's master fields from <jpegint.h> (first/last iMCU column:
// the fields jpeg_crop_scanline itself sets and the coefficient controller
// reads), only for libjpeg-turbo 2.1.x; other versions take the TurboJPEG path.
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
#include "codecs/libjpeg_decompressor.h"
#include "codecs/pixel_output.h"
#include "codecs/sample_geometry.h"
#include "codecs/scaled_crop.h"

// jpegint.h declares the decompressor's module structs (master, IDCT); it has
// no extern "C" of its own.
#if __has_include(<jpegint.h>)
extern "C" {
#include <jpegint.h>
}
#define STOKER_HAVE_JPEGINT 1
#else
#define STOKER_HAVE_JPEGINT 0
#endif

// The region path writes jpeg_decomp_master's crop fields and overrides the
// chroma IDCT for DCT-scaled 4:2:0 (as turbojpeg.c does): internals, checked
// against libjpeg-turbo 2.1.x by the region tests. Elsewhere (another version,
// or no jpegint.h installed) every decode takes the TurboJPEG path: the same
// pixels, only slower.
#if STOKER_HAVE_JPEGINT && defined(LIBJPEG_TURBO_VERSION_NUMBER) && LIBJPEG_TURBO_VERSION_NUMBER >= 2001000 && \
    LIBJPEG_TURBO_VERSION_NUMBER < 2002000
#define STOKER_JPEG_REGION_DECODE 1
#else
#define STOKER_JPEG_REGION_DECODE 0
#endif

namespace stoker {

#if STOKER_JPEG_REGION_DECODE
namespace {

void StartStep(j_decompress_ptr c, void* arg) {
  c->scale_num = 1;
  c->scale_denom = static_cast<unsigned int>(*static_cast<const int*>(arg));
  c->raw_data_out = TRUE;           // planes at native subsampling: no upsampling, no color conversion
  c->do_fancy_upsampling = FALSE;   // no upsampler at all in raw mode; say so anyway
  c->dct_method = JDCT_ISLOW;       // what TurboJPEG uses: the planes then match it exactly
  jpeg_start_decompress(c);
}

// What ReadRowsStep decodes: the iMCU rows [first_row, last_row] and the
// iMCU columns [first_iMCU_col, last_iMCU_col] of them (jpeg_crop_scanline's
// fields, in its units), into rows[c] (rows_per_imcu[c] rows per iMCU row).
struct RowsJob {
  int ncomp;
  int first_row, last_row, total_rows;
  bool read_to_end;
  JDIMENSION lines;  // output lines per iMCU row: max_v_samp_factor * min_DCT_scaled_size
  JDIMENSION first_iMCU_col, last_iMCU_col;
  JDIMENSION first_MCU_col[3], last_MCU_col[3];
  JSAMPARRAY rows[3];
  int rows_per_imcu[3];
};

// first > last: the coefficient controller entropy-decodes every MCU (it
// must, to stay in sync) but runs no IDCT, which is what jpeg_skip_scanlines
// does outside raw mode.
void SetColumns(j_decompress_ptr c, const RowsJob& j, bool decode) {
  jpeg_decomp_master* m = c->master;
  m->first_iMCU_col = decode ? j.first_iMCU_col : 1;
  m->last_iMCU_col = decode ? j.last_iMCU_col : 0;
  for (int ci = 0; ci < j.ncomp; ++ci) {
    m->first_MCU_col[ci] = decode ? j.first_MCU_col[ci] : 1;
    m->last_MCU_col[ci] = decode ? j.last_MCU_col[ci] : 0;
  }
}

void ReadRowsStep(j_decompress_ptr c, void* arg) {
  const RowsJob& j = *static_cast<const RowsJob*>(arg);
  JSAMPARRAY data[MAX_COMPONENTS] = {};
  for (int ci = 0; ci < j.ncomp; ++ci) data[ci] = j.rows[ci];  // never written while skipping
  SetColumns(c, j, false);
  for (int r = 0; r < j.first_row; ++r) {
    if (jpeg_read_raw_data(c, data, j.lines) == 0) FailWith(reinterpret_cast<j_common_ptr>(c), "suspended (cannot happen: memory source)");
  }
  SetColumns(c, j, true);
  for (int r = j.first_row; r <= j.last_row; ++r) {
    for (int ci = 0; ci < j.ncomp; ++ci) data[ci] = j.rows[ci] + (r - j.first_row) * j.rows_per_imcu[ci];
    if (jpeg_read_raw_data(c, data, j.lines) == 0) FailWith(reinterpret_cast<j_common_ptr>(c), "suspended (cannot happen: memory source)");
  }
  if (!j.read_to_end) return;
  SetColumns(c, j, false);
  for (int ci = 0; ci < j.ncomp; ++ci) data[ci] = j.rows[ci];
  for (int r = j.last_row + 1; r < j.total_rows; ++r) {
    if (jpeg_read_raw_data(c, data, j.lines) == 0) FailWith(reinterpret_cast<j_common_ptr>(c), "suspended (cannot happen: memory source)");
  }
  jpeg_finish_decompress(c);  // reads up to EOI: a missing end is a warning, so an error
}

// TJSAMP_* of a JPEG the region path handles, or -1: one gray component, or
// YCbCr with chroma at 1x1 and luma at 1x1, 2x1, 2x2 or 1x2.
int RegionSubsamp(const jpeg_decompress_struct& c) {
  if (c.num_components == 1) {
    if (c.jpeg_color_space != JCS_GRAYSCALE) return -1;
    const jpeg_component_info& y = c.comp_info[0];
    return y.h_samp_factor == 1 && y.v_samp_factor == 1 ? TJSAMP_GRAY : -1;
  }
  if (c.num_components != 3 || c.jpeg_color_space != JCS_YCbCr) return -1;
  for (int ci = 1; ci < 3; ++ci) {
    if (c.comp_info[ci].h_samp_factor != 1 || c.comp_info[ci].v_samp_factor != 1) return -1;
  }
  const int h = c.comp_info[0].h_samp_factor, v = c.comp_info[0].v_samp_factor;
  if (h == 1 && v == 1) return TJSAMP_444;
  if (h == 2 && v == 1) return TJSAMP_422;
  if (h == 2 && v == 2) return TJSAMP_420;
  if (h == 1 && v == 2) return TJSAMP_440;
  return -1;
}

// Whether to go on past the crop's last iMCU row: entropy-decode the rows
// below it (no IDCT) and read up to EOI, so that a warning there (truncated
// data, a corrupt segment) is a DataLoss as on the TurboJPEG path. That
// costs ~10% of an RRC decode (bench/decode_bench.cc), so it is skipped when
// the buffer ends with an EOI marker: a truncated file cannot, and it is
// always caught. What is not caught then is a corrupt segment below the crop
// in a complete file; the pixels returned are still exact (entropy data is
// sequential: rows above a corrupt segment decode the same), the file only
// fails on the crops that reach it.
bool MustReadToEnd(std::span<const uint8_t> jpeg) {
  const size_t n = jpeg.size();
  return !(n >= 2 && jpeg[n - 2] == 0xFF && jpeg[n - 1] == 0xD9);
}

}  // namespace

Result<bool> DecodeRegion(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg,
                          const ImageSpec& spec, uint64_t sample_seed, std::span<uint8_t> out) {
  if (!lj.ok) return false;
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  jpeg_decompress_struct& ci = lj.cinfo;
  AbortOnExit reset{&ci};
  HeaderArgs header{jpeg.data(), jpeg.size()};
  if (!Guarded(&lj, ReadHeaderStep, &header)) return LibjpegError(lj, "header");
  const int subsamp = RegionSubsamp(ci);
  if (subsamp < 0) return false;
  const int width = static_cast<int>(ci.image_width), height = static_cast<int>(ci.image_height);
  if (width <= 0 || height <= 0) return DataLoss("JPEG has no pixels");
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, width, height, sample_seed));
  const ScaledPlan p = PlanScale(spec, g, width, height);
  int denom = p.denom;
  if (!Guarded(&lj, StartStep, &denom)) return LibjpegError(lj, "decode");
  if (static_cast<int>(ci.output_width) != p.sw || static_cast<int>(ci.output_height) != p.sh) return false;

  const int ncomp = ci.num_components;
  const int dct = ci.min_DCT_scaled_size;
  // Scaled 4:2:0: libjpeg would IDCT-upscale chroma to luma resolution
  // (8x8 chroma blocks at 1/2); like tjDecompressToYUVPlanes we override
  // that so chroma comes out subsampled, decoded by luma's scaled IDCT.
  if (subsamp == TJSAMP_420) {
    for (int c = 1; c < 3; ++c) {
      jpeg_component_info& comp = ci.comp_info[c];
      comp.DCT_scaled_size = dct;
      comp.MCU_sample_width = comp.MCU_width * dct;
      ci.idct->inverse_DCT[c] = ci.idct->inverse_DCT[0];
    }
  }
  // An iMCU spans `align` scaled luma columns and hs[c]*dct columns (vs[c]*dct
  // rows) of plane c. A one-component image is cropped by single blocks.
  const int align = ncomp == 1 ? dct : ci.max_h_samp_factor * dct;
  int hs[3] = {1, 1, 1}, vs[3] = {1, 1, 1};
  int pw[3], ph[3];
  PlaneWindow win[3];
  int col0 = std::numeric_limits<int>::max(), col1 = 0, row0 = std::numeric_limits<int>::max(), row1 = 0;
  for (int c = 0; c < ncomp; ++c) {
    if (ci.comp_info[c].DCT_scaled_size != dct) return false;  // a layout this code does not know
    if (ncomp > 1) {
      hs[c] = ci.comp_info[c].h_samp_factor;
      vs[c] = ci.comp_info[c].v_samp_factor;
    }
    pw[c] = tjPlaneWidth(c, p.sw, subsamp);
    ph[c] = tjPlaneHeight(c, p.sh, subsamp);
    win[c] = PlaneCrop(p, pw[c], ph[c]);
    const int uw = hs[c] * dct, uh = vs[c] * dct;
    col0 = std::min(col0, win[c].x0 / uw);
    col1 = std::max(col1, (win[c].x0 + win[c].w - 1) / uw);
    row0 = std::min(row0, win[c].y0 / uh);
    row1 = std::max(row1, (win[c].y0 + win[c].h - 1) / uh);
  }
  const int total_rows = static_cast<int>(ci.total_iMCU_rows);
  if (row1 >= total_rows || static_cast<int64_t>(col1) * align >= p.sw) return false;  // cannot happen

  // Columns exactly as jpeg_crop_scanline would set them for
  // xoffset = col0 * align and the right edge min(sw, (col1 + 1) * align).
  RowsJob job{};
  job.ncomp = ncomp;
  job.first_row = row0;
  job.last_row = row1;
  job.total_rows = total_rows;
  job.read_to_end = MustReadToEnd(jpeg);
  job.lines = static_cast<JDIMENSION>(ci.max_v_samp_factor * dct);
  const int64_t xoff = static_cast<int64_t>(col0) * align;
  const int64_t xend = std::min<int64_t>(p.sw, static_cast<int64_t>(col1 + 1) * align);
  job.first_iMCU_col = static_cast<JDIMENSION>(col0);
  job.last_iMCU_col = static_cast<JDIMENSION>((xend + align - 1) / align - 1);
  size_t total = 0, nrows = 0;
  int bw[3], bh[3];
  for (int c = 0; c < ncomp; ++c) {
    job.first_MCU_col[c] = static_cast<JDIMENSION>(xoff * hs[c] / align);
    job.last_MCU_col[c] = static_cast<JDIMENSION>((xend * hs[c] + align - 1) / align - 1);
    job.rows_per_imcu[c] = vs[c] * dct;
    bw[c] = (col1 - col0 + 1) * hs[c] * dct;
    bh[c] = (row1 - row0 + 1) * vs[c] * dct;
    total += static_cast<size_t>(bw[c]) * bh[c];
    nrows += static_cast<size_t>(bh[c]);
  }
  uint8_t* base = Grow(scratch.decoded, total);
  if (scratch.row_ptrs.size() < nrows) scratch.row_ptrs.resize(nrows);
  const uint8_t* src[3] = {};
  int stride[3] = {};
  JSAMPROW* rp = scratch.row_ptrs.data();
  for (int c = 0; c < ncomp; ++c) {
    job.rows[c] = rp;
    for (int y = 0; y < bh[c]; ++y) *rp++ = base + static_cast<size_t>(y) * bw[c];
    // The decoded window starts at iMCU (col0, row0); the crop sits inside it.
    src[c] = base + static_cast<size_t>(win[c].y0 - row0 * vs[c] * dct) * bw[c] + (win[c].x0 - col0 * hs[c] * dct);
    stride[c] = bw[c];
    base += static_cast<size_t>(bw[c]) * bh[c];
  }
  if (!Guarded(&lj, ReadRowsStep, &job)) return LibjpegError(lj, "decode");
  FillLumaPad(job.rows[0][0], bw[0], col0 * hs[0] * dct, row0 * vs[0] * dct, bw[0], bh[0],
              DecodedLuma(width, p.denom), DecodedLuma(height, p.denom));

  const int rw = g.resized_w, rh = g.resized_h;
  const size_t rplane = static_cast<size_t>(rw) * rh;
  uint8_t* res = Grow(scratch.resized, rplane * 3);
  uint8_t* out_rgb = Grow(scratch.rgb, rplane * 3);
  PlanesToRgb(src, stride, win, ncomp, subsamp, rw, rh, res, out_rgb);
  WriteOutput(out_rgb, rw, rh, spec, g.hflip, out);
  return true;
}
#else
Result<bool> DecodeRegion(LibJpeg&, DecodeScratch&, std::span<const uint8_t>, const ImageSpec&, uint64_t,
                          std::span<uint8_t>) {
  return false;
}
#endif  // STOKER_JPEG_REGION_DECODE

}  // namespace stoker
