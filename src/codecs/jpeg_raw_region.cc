// codecs/jpeg_raw_region.cc — raw iMCU-rectangle decode (see header).
//
// How: raw_data_out (planes at native subsampling, no upsampling, no color
// conversion), ISLOW IDCT (what TurboJPEG and Pillow use), and the crop set
// in the decompressor's master fields from <jpegint.h> (first/last iMCU
// column: the fields jpeg_crop_scanline itself sets and the coefficient
// controller reads). Rows above the rectangle are entropy-decoded without
// IDCT (first > last column), rows below it are not read when the stream ends
// with EOI (else entropy-decoded to catch a truncation; see MustReadToEnd).
// Why libjpeg internals: the public API cannot crop or skip in raw mode
// (jpeg_crop_scanline and jpeg_skip_scanlines refuse DSTATE_RAW_OK), and raw
// mode is what keeps chroma subsampled and unconverted. Only for
// libjpeg-turbo 2.1.x, whose internals the region tests check; other versions
// report RawRegionSupported() == false.
// Thread-safety: see header.
#include "codecs/jpeg_raw_region.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstddef>

#include "codecs/decode_scratch.h"
#include "codecs/libjpeg_decompressor.h"

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

#if STOKER_HAVE_JPEGINT && defined(LIBJPEG_TURBO_VERSION_NUMBER) && LIBJPEG_TURBO_VERSION_NUMBER >= 2001000 && \
    LIBJPEG_TURBO_VERSION_NUMBER < 2002000
#define STOKER_JPEG_RAW_REGION 1
#else
#define STOKER_JPEG_RAW_REGION 0
#endif

namespace stoker {

#if STOKER_JPEG_RAW_REGION
namespace {

void StartStep(j_decompress_ptr c, void* arg) {
  c->scale_num = 1;
  c->scale_denom = static_cast<unsigned int>(*static_cast<const int*>(arg));
  c->raw_data_out = TRUE;           // planes at native subsampling: no upsampling, no color conversion
  c->do_fancy_upsampling = FALSE;   // no upsampler at all in raw mode; say so anyway
  c->dct_method = JDCT_ISLOW;       // what TurboJPEG and Pillow use: the planes then match them exactly
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

// TJSAMP_* of a JPEG the raw path handles, or -1: one gray component, or
// YCbCr with chroma at 1x1 and luma at 1x1, 2x1, 2x2 or 1x2.
int RawSubsamp(const jpeg_decompress_struct& c) {
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

// Whether to go on past the rectangle's last iMCU row: entropy-decode the
// rows below it (no IDCT) and read up to EOI, so that a warning there
// (truncated data, a corrupt segment) is a DataLoss as on the TurboJPEG path.
// That costs ~10% of an RRC decode (bench/decode_bench.cc), so it is skipped
// when the buffer ends with an EOI marker: a truncated file cannot, and it is
// always caught. What is not caught then is a corrupt segment below the
// rectangle in a complete file; the pixels returned are still exact (entropy
// data is sequential: rows above a corrupt segment decode the same), the
// file only fails on the crops that reach it.
bool MustReadToEnd(std::span<const uint8_t> jpeg) {
  const size_t n = jpeg.size();
  return !(n >= 2 && jpeg[n - 2] == 0xFF && jpeg[n - 1] == 0xD9);
}

}  // namespace

bool RawRegionSupported() { return true; }

Result<int> ReadRawHeader(LibJpeg& lj, std::span<const uint8_t> jpeg) {
  if (!lj.ok) return -1;
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  HeaderArgs header{jpeg.data(), jpeg.size()};
  if (!Guarded(&lj, ReadHeaderStep, &header)) return LibjpegError(lj, "header");
  return RawSubsamp(lj.cinfo);
}

Result<bool> StartRaw(LibJpeg& lj, int subsamp, int denom, RawLayout* l) {
  jpeg_decompress_struct& ci = lj.cinfo;
  if (!Guarded(&lj, StartStep, &denom)) return LibjpegError(lj, "decode");
  const int ncomp = ci.num_components;
  const int dct = ci.min_DCT_scaled_size;
  l->subsamp = subsamp;
  l->ncomp = ncomp;
  l->width = static_cast<int>(ci.output_width);
  l->height = static_cast<int>(ci.output_height);
  l->dct = dct;
  l->total_rows = static_cast<int>(ci.total_iMCU_rows);
  for (int c = 0; c < ncomp; ++c) {
    l->plane_w[c] = static_cast<int>(ci.comp_info[c].downsampled_width);
    l->plane_h[c] = static_cast<int>(ci.comp_info[c].downsampled_height);
  }
  // Scaled 4:2:0: libjpeg would IDCT-upscale chroma to luma resolution
  // (8x8 chroma blocks at 1/2); like tjDecompressToYUVPlanes we override
  // that so chroma comes out subsampled, decoded by luma's scaled IDCT.
  if (subsamp == TJSAMP_420) {
    for (int c = 1; c < 3; ++c) {
      jpeg_component_info& comp = ci.comp_info[c];
      comp.DCT_scaled_size = dct;
      // A chroma MCU is one block wide here (h_samp_factor 1: RawSubsamp),
      // interleaved or not. MCU_width says the same but is set per scan: in a
      // multi-scan file cut before a component's scan it is what the allocator
      // left there (tests/fuzz/regressions/jpeg/luma_scan_alone_in_a_420_file: 0xBEBEBEBE * 8).
      comp.MCU_sample_width = dct;
      ci.idct->inverse_DCT[c] = ci.idct->inverse_DCT[0];
    }
  }
  // An iMCU spans `align` scaled luma columns and hs[c]*dct columns (vs[c]*dct
  // rows) of plane c. A one-component image is cropped by single blocks.
  l->align = ncomp == 1 ? dct : ci.max_h_samp_factor * dct;
  for (int c = 0; c < ncomp; ++c) {
    if (ci.comp_info[c].DCT_scaled_size != dct) return false;  // a layout this code does not know
    l->hs[c] = ncomp > 1 ? ci.comp_info[c].h_samp_factor : 1;
    l->vs[c] = ncomp > 1 ? ci.comp_info[c].v_samp_factor : 1;
  }
  return true;
}

Status DecodeRawImcus(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg, const RawLayout& l,
                      int col0, int col1, int row0, int row1, RawPlanes* planes) {
  const int ncomp = l.ncomp, dct = l.dct, align = l.align;
  if (row0 < 0 || row1 >= l.total_rows || col0 < 0 || static_cast<int64_t>(col1) * align >= l.width ||
      row0 > row1 || col0 > col1) {
    return Internal("raw region outside the image (cannot happen)");
  }
  // Columns exactly as jpeg_crop_scanline would set them for
  // xoffset = col0 * align and the right edge min(width, (col1 + 1) * align).
  RowsJob job{};
  job.ncomp = ncomp;
  job.first_row = row0;
  job.last_row = row1;
  job.total_rows = l.total_rows;
  job.read_to_end = MustReadToEnd(jpeg);
  job.lines = static_cast<JDIMENSION>(lj.cinfo.max_v_samp_factor * dct);
  const int64_t xoff = static_cast<int64_t>(col0) * align;
  const int64_t xend = std::min<int64_t>(l.width, static_cast<int64_t>(col1 + 1) * align);
  job.first_iMCU_col = static_cast<JDIMENSION>(col0);
  job.last_iMCU_col = static_cast<JDIMENSION>((xend + align - 1) / align - 1);
  size_t total = 0, nrows = 0;
  int bw[3], bh[3];
  for (int c = 0; c < ncomp; ++c) {
    job.first_MCU_col[c] = static_cast<JDIMENSION>(xoff * l.hs[c] / align);
    job.last_MCU_col[c] = static_cast<JDIMENSION>((xend * l.hs[c] + align - 1) / align - 1);
    job.rows_per_imcu[c] = l.vs[c] * dct;
    bw[c] = (col1 - col0 + 1) * l.hs[c] * dct;
    bh[c] = (row1 - row0 + 1) * l.vs[c] * dct;
    total += static_cast<size_t>(bw[c]) * bh[c];
    nrows += static_cast<size_t>(bh[c]);
  }
  // 64 bytes of slack: SIMD readers may load a vector past a row's end.
  uint8_t* base = Grow(scratch.decoded, total + 64);
  if (scratch.row_ptrs.size() < nrows) scratch.row_ptrs.resize(nrows);
  JSAMPROW* rp = scratch.row_ptrs.data();
  for (int c = 0; c < ncomp; ++c) {
    job.rows[c] = rp;
    for (int y = 0; y < bh[c]; ++y) *rp++ = base + static_cast<size_t>(y) * bw[c];
    planes->plane[c] = base;
    planes->stride[c] = bw[c];
    planes->x0[c] = col0 * l.hs[c] * dct;
    planes->y0[c] = row0 * l.vs[c] * dct;
    planes->w[c] = bw[c];
    planes->h[c] = bh[c];
    base += static_cast<size_t>(bw[c]) * bh[c];
  }
  if (!Guarded(&lj, ReadRowsStep, &job)) return LibjpegError(lj, "decode");
  return Status::Ok();
}

#else
bool RawRegionSupported() { return false; }
Result<int> ReadRawHeader(LibJpeg&, std::span<const uint8_t>) { return -1; }
Result<bool> StartRaw(LibJpeg&, int, int, RawLayout*) { return false; }
Status DecodeRawImcus(LibJpeg&, DecodeScratch&, std::span<const uint8_t>, const RawLayout&, int, int, int, int,
                      RawPlanes*) {
  return Internal("raw region decode not built");
}
#endif  // STOKER_JPEG_RAW_REGION

}  // namespace stoker
