// codecs/jpeg.cc — JPEG decode/encode (see jpeg.h).
//
// Fast path, region decode (YCbCr or gray JPEGs in 4:4:4, 4:2:2, 4:2:0,
// 4:4:0, baseline or progressive), through the libjpeg API of libjpeg-turbo:
//   header -> PlanSample (crop, size, flip) -> DCT scale 1/8..1/2 when the
//   scaled crop stays >= the output -> raw (planar, not upsampled, not
//   color-converted) decode of only the iMCU rows and columns that hold the
//   crop: rows above it are entropy-decoded without IDCT, columns beside it
//   get no IDCT, rows below it are not read when the stream ends with EOI
//   (else entropy-decoded to catch a truncation; see MustReadToEnd) -> crop
//   each plane by pointer offset -> ResizePlane each plane (chroma keeps its
//   subsampling, so it costs a quarter of luma) -> one small full-range
//   BT.601 YCbCr->RGB at output size with bilinear chroma upsampling
//   (libyuv, "JPEG" matrix) -> layout/dtype/flip/pad into the caller's slot.
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
// TurboJPEG path (CMYK/YCCK, RGB-coded, 4:1:1 and other layouts, mode kNone,
//   and the reference for tests): tjDecompressToYUVPlanes for full planes, or
//   tjDecompress2 to RGB (or CMYK, converted like Pillow) at the same DCT
//   scale, split to planes, same crop/resize.
// Full-size DecodeRgb uses TurboJPEG's defaults (ISLOW IDCT, fancy
// upsampling), which is what Pillow does, so the two agree bit for bit.
// Warnings (e.g. truncated data) are errors on both paths: a libjpeg warning
// jumps out like an error (TJFLAG_STOPONWARNING on the TurboJPEG side).
// Thread-safety: a JpegDecoder belongs to one thread; EncodeJpeg is
// reentrant (it makes its own handle).
#include "codecs/jpeg.h"

#include <libyuv.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

// jpeglib.h needs <cstdio> (FILE) first. jpegint.h declares the decompressor's
// module structs (master, IDCT); it has no extern "C" of its own.
#include <jpeglib.h>
#if __has_include(<jpegint.h>)
extern "C" {
#include <jpegint.h>
}
#define STOKER_HAVE_JPEGINT 1
#else
#define STOKER_HAVE_JPEGINT 0
#endif

#include "codecs/resize.h"
#include "codecs/sample_geometry.h"

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
namespace {

struct TjDeleter {
  void operator()(void* h) const {
    if (h != nullptr) tjDestroy(h);
  }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

// STOPONWARNING: a truncated or corrupt stream is a DataLoss, not a gray
// patch. LIMITSCANS: a progressive JPEG with >500 scans is a decompression
// bomb, not an image.
constexpr int kDecodeFlags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;

Status TjError(tjhandle h, const char* what) {
  return DataLoss(std::string("JPEG ") + what + ": " + tjGetErrorStr2(h));
}

// Grows a scratch buffer; never shrinks, so a warm decoder does not allocate.
uint8_t* Grow(std::vector<uint8_t>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Pillow reads Adobe CMYK JPEGs as inverted ("CMYK;I") and converts with
// cmyk2rgb: out = nk - nk*c/255 (MULDIV255 rounding), nk = 255 - k.
// TurboJPEG hands back the stored bytes, so c = 255 - stored.
inline uint8_t MulDiv255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}
void CmykToRgbLikePillow(const uint8_t* cmyk, size_t pixels, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i) {
    const int c = 255 - cmyk[4 * i], m = 255 - cmyk[4 * i + 1], y = 255 - cmyk[4 * i + 2];
    const int nk = cmyk[4 * i + 3];  // 255 - (255 - stored k)
    rgb[3 * i] = static_cast<uint8_t>(nk - MulDiv255(c, nk));
    rgb[3 * i + 1] = static_cast<uint8_t>(nk - MulDiv255(m, nk));
    rgb[3 * i + 2] = static_cast<uint8_t>(nk - MulDiv255(y, nk));
  }
}

bool HasPlanarFastPath(int subsamp, int colorspace) {
  if (colorspace == TJCS_GRAY) return subsamp == TJSAMP_GRAY;
  if (colorspace != TJCS_YCbCr) return false;
  return subsamp == TJSAMP_444 || subsamp == TJSAMP_422 || subsamp == TJSAMP_420 ||
         subsamp == TJSAMP_440;
}

// Writes the resized HWC RGB region (rw x rh) into the output slot with the
// spec's layout, dtype, normalization, flip and zero padding. One pass over
// the output; float conversion is a per-channel 256-entry table.
void WriteOutput(const uint8_t* rgb, int rw, int rh, const ImageSpec& spec, bool hflip,
                 std::span<uint8_t> out) {
  const int W = spec.width, H = spec.height;
  const size_t plane = static_cast<size_t>(W) * H;
  const bool padded = rw != W || rh != H;
  if (padded) std::memset(out.data(), 0, out.size());
  if (spec.pixel == PixelType::kUint8) {
    uint8_t* o = out.data();
    for (int y = 0; y < rh; ++y) {
      const uint8_t* s = rgb + static_cast<size_t>(y) * rw * 3;
      if (!spec.chw) {
        uint8_t* d = o + static_cast<size_t>(y) * W * 3;
        if (!hflip) {
          std::memcpy(d, s, static_cast<size_t>(rw) * 3);
        } else {
          for (int x = 0; x < rw; ++x) std::memcpy(d + 3 * x, s + 3 * (rw - 1 - x), 3);
        }
      } else {
        uint8_t* r = o + static_cast<size_t>(y) * W;
        uint8_t* g = r + plane;
        uint8_t* b = g + plane;
        if (!hflip) {
          libyuv::SplitRGBPlane(s, rw * 3, r, W, g, W, b, W, rw, 1);
        } else {
          for (int x = 0; x < rw; ++x) {
            const uint8_t* p = s + 3 * (rw - 1 - x);
            r[x] = p[0];
            g[x] = p[1];
            b[x] = p[2];
          }
        }
      }
    }
    return;
  }
  float lut[3][256];
  for (int c = 0; c < 3; ++c) {
    const float mean = spec.normalize ? spec.mean[c] : 0.0f;
    const float inv_std = spec.normalize ? 1.0f / spec.std[c] : 1.0f;
    // Same expression order as torchvision's ToTensor + Normalize: x/255 first.
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.0f - mean) * inv_std;
  }
  // `out` is a slot of a batch buffer of floats, hence 4-byte aligned.
  float* o = reinterpret_cast<float*>(out.data());
  for (int y = 0; y < rh; ++y) {
    const uint8_t* s = rgb + static_cast<size_t>(y) * rw * 3;
    if (!spec.chw) {
      float* d = o + static_cast<size_t>(y) * W * 3;
      for (int x = 0; x < rw; ++x) {
        const uint8_t* p = s + 3 * (hflip ? rw - 1 - x : x);
        d[3 * x] = lut[0][p[0]];
        d[3 * x + 1] = lut[1][p[1]];
        d[3 * x + 2] = lut[2][p[2]];
      }
    } else {
      float* r = o + static_cast<size_t>(y) * W;
      float* g = r + plane;
      float* b = g + plane;
      for (int x = 0; x < rw; ++x) {
        const uint8_t* p = s + 3 * (hflip ? rw - 1 - x : x);
        r[x] = lut[0][p[0]];
        g[x] = lut[1][p[1]];
        b[x] = lut[2][p[2]];
      }
    }
  }
  // Padding of a float output: 0.0f is all-zero bytes, done by the memset.
}

// Where a sample's crop lands after DCT scaling. Both decode paths use this,
// so they crop the same pixels.
struct ScaledPlan {
  int denom = 1;                       // DCT scale 1/denom
  int sw = 0, sh = 0;                  // scaled image size
  int cx0 = 0, cy0 = 0, cw = 0, ch = 0;  // crop window in scaled pixels
};

ScaledPlan PlanScale(const ImageSpec& spec, const SampleGeometry& g, int width, int height) {
  ScaledPlan p;
  // DCT scaling: the largest of 1/8, 1/4, 1/2 whose scaled crop still holds
  // at least the output pixels (so we only ever shrink after it). Other
  // factors (5/8, 3/4...) have no SIMD IDCT here and lose to a full decode.
  if (spec.mode != ResizeMode::kNone) {
    for (int d : {8, 4, 2}) {
      if (static_cast<int64_t>(g.crop_w) >= static_cast<int64_t>(g.resized_w) * d &&
          static_cast<int64_t>(g.crop_h) >= static_cast<int64_t>(g.resized_h) * d) {
        p.denom = d;
        break;
      }
    }
  }
  const tjscalingfactor sf{1, p.denom};
  p.sw = TJSCALED(width, sf);
  p.sh = TJSCALED(height, sf);
  // Crop in scaled pixels; the window is widened outward to whole pixels.
  p.cx0 = static_cast<int>(static_cast<int64_t>(g.crop_x) * p.sw / width);
  p.cy0 = static_cast<int>(static_cast<int64_t>(g.crop_y) * p.sh / height);
  const int cx1 = std::min<int>(p.sw, static_cast<int>((static_cast<int64_t>(g.crop_x + g.crop_w) * p.sw + width - 1) / width));
  const int cy1 = std::min<int>(p.sh, static_cast<int>((static_cast<int64_t>(g.crop_y + g.crop_h) * p.sh + height - 1) / height));
  p.cw = std::max(1, cx1 - p.cx0);
  p.ch = std::max(1, cy1 - p.cy0);
  return p;
}

// The crop window in one plane's own pixels (pw x ph: chroma planes are
// smaller by the subsampling factor).
struct PlaneWindow {
  int x0 = 0, y0 = 0, w = 1, h = 1;
};

PlaneWindow PlaneCrop(const ScaledPlan& p, int pw, int ph) {
  PlaneWindow win;
  win.x0 = static_cast<int>(static_cast<int64_t>(p.cx0) * pw / p.sw);
  win.y0 = static_cast<int>(static_cast<int64_t>(p.cy0) * ph / p.sh);
  const int x1 = std::min<int>(pw, static_cast<int>((static_cast<int64_t>(p.cx0 + p.cw) * pw + p.sw - 1) / p.sw));
  const int y1 = std::min<int>(ph, static_cast<int>((static_cast<int64_t>(p.cy0 + p.ch) * ph + p.sh - 1) / p.sh));
  win.w = std::max(1, x1 - win.x0);
  win.h = std::max(1, y1 - win.y0);
  return win;
}

// tjPlaneWidth/Height round an odd luma size up to the chroma factor (a
// 63-pixel-wide 4:2:0 image has a 64-pixel luma plane). At DCT scale 1/8 a
// block is one pixel, so that pad column/row is a dummy block nobody decodes
// (TurboJPEG leaves its scratch there; the region buffer holds an earlier
// image), yet a crop window at the edge reaches it. Both paths define it as a
// copy of the last decoded column/row. `buf` holds luma pixels [x0, x0+w) x
// [y0, y0+h); real_w/real_h are the decoded extent (>= the plane at 1/2..1/1).
void FillLumaPad(uint8_t* buf, int stride, int x0, int y0, int w, int h, int real_w, int real_h) {
  if (real_w > x0 && real_w < x0 + w) {
    for (int y = 0; y < h; ++y) {
      uint8_t* row = buf + static_cast<size_t>(y) * stride;
      std::memset(row + (real_w - x0), row[real_w - 1 - x0], static_cast<size_t>(x0 + w - real_w));
    }
  }
  if (real_h > y0) {
    for (int y = real_h; y < y0 + h; ++y) {
      std::memcpy(buf + static_cast<size_t>(y - y0) * stride, buf + static_cast<size_t>(real_h - 1 - y0) * stride,
                  static_cast<size_t>(w));
    }
  }
}

// Decoded luma extent at DCT scale 1/denom: whole 8x8 blocks, each scaled.
int DecodedLuma(int size, int denom) { return (size + 7) / 8 * (8 / denom); }

// Resizes the cropped Y[,Cb,Cr] planes (src[c] is the window's top-left
// pixel) to rw x rh and converts them to HWC RGB in `rgb`; `res` holds the 3
// resized planes. Chroma keeps its subsampling through the resize (4:2:0 ->
// a 4:2:0 result) so it costs a quarter of luma; libyuv's *MatrixFilter
// converters then upsample it bilinearly, not by replication. 4:4:0 has no
// libyuv converter, so its chroma is resized to full size (4:4:4).
void PlanesToRgb(const uint8_t* const src[3], const int stride[3], const PlaneWindow win[3], int ncomp,
                 int subsamp, int rw, int rh, uint8_t* res, uint8_t* rgb) {
  const size_t rplane = static_cast<size_t>(rw) * rh;
  const bool half_w = subsamp == TJSAMP_420 || subsamp == TJSAMP_422;
  const bool half_h = subsamp == TJSAMP_420;
  const int tw[3] = {rw, half_w ? (rw + 1) / 2 : rw, half_w ? (rw + 1) / 2 : rw};
  const int th[3] = {rh, half_h ? (rh + 1) / 2 : rh, half_h ? (rh + 1) / 2 : rh};
  uint8_t* rp[3] = {res, res + rplane, res + 2 * rplane};
  for (int c = 0; c < ncomp; ++c) {
    ResizePlane(src[c], stride[c], win[c].w, win[c].h, rp[c], tw[c], tw[c], th[c]);
  }
  // libyuv's RGB24 is B,G,R in memory; swapping U/V and using the mirrored
  // (Yvu) matrix yields R,G,B, the same trick as its I444ToRAW.
  const libyuv::YuvConstants* yvu = &libyuv::kYvuJPEGConstants;
  if (ncomp == 1) {
    for (size_t i = 0; i < rplane; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = res[i];
  } else if (subsamp == TJSAMP_420) {
    libyuv::I420ToRGB24MatrixFilter(rp[0], rw, rp[2], tw[2], rp[1], tw[1], rgb, rw * 3, yvu, rw, rh,
                                    libyuv::kFilterBilinear);
  } else if (subsamp == TJSAMP_422) {
    libyuv::I422ToRGB24MatrixFilter(rp[0], rw, rp[2], tw[2], rp[1], tw[1], rgb, rw * 3, yvu, rw, rh,
                                    libyuv::kFilterBilinear);
  } else {
    libyuv::I444ToRGB24Matrix(rp[0], rw, rp[2], rw, rp[1], rw, rgb, rw * 3, yvu, rw, rh);
  }
}

#if STOKER_JPEG_REGION_DECODE

// libjpeg reports a fatal error through error_exit and a warning through
// emit_message(-1); both jump back to Guarded(). A warning is an error here
// (TJFLAG_STOPONWARNING on the TurboJPEG path): a truncated or corrupt stream
// is a DataLoss, not a gray patch.
struct JpegErrorMgr {
  jpeg_error_mgr pub;  // first member: libjpeg hands back a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JumpOut(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}
void OnJpegError(j_common_ptr c) { JumpOut(c); }
void OnJpegMessage(j_common_ptr c, int level) {
  if (level < 0) JumpOut(c);  // warning; levels >= 0 are trace messages
}
[[noreturn]] void FailWith(j_common_ptr c, const char* what) {
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  std::snprintf(e->message, sizeof(e->message), "%s", what);
  std::longjmp(e->jump, 1);
}
// TJFLAG_LIMITSCANS on this path: a progressive JPEG with >500 scans is a
// decompression bomb, not an image.
void OnJpegProgress(j_common_ptr c) {
  if (c->is_decompressor && reinterpret_cast<j_decompress_ptr>(c)->input_scan_number > 500) {
    FailWith(c, "Progressive JPEG image has more than 500 scans");
  }
}

// One libjpeg decompressor, created once per JpegDecoder and reused for every
// image (jpeg_abort_decompress returns it to the start state).
struct LibJpeg {
  jpeg_decompress_struct cinfo;
  JpegErrorMgr err;
  jpeg_progress_mgr progress;
  bool ok = false;

  LibJpeg();
  ~LibJpeg() {
    if (ok) jpeg_destroy_decompress(&cinfo);
  }
  LibJpeg(const LibJpeg&) = delete;
  LibJpeg& operator=(const LibJpeg&) = delete;
};

// The one setjmp. Only PODs live in this frame and in `step`'s, so the
// longjmp from a libjpeg callback skips no destructor. Returns false with
// err.message set when libjpeg failed or warned.
bool Guarded(LibJpeg* lj, void (*step)(j_decompress_ptr, void*), void* arg) {
  if (setjmp(lj->err.jump) != 0) return false;
  step(&lj->cinfo, arg);
  return true;
}

void CreateStep(j_decompress_ptr c, void*) { jpeg_create_decompress(c); }

LibJpeg::LibJpeg() {
  std::memset(&cinfo, 0, sizeof(cinfo));
  std::memset(&progress, 0, sizeof(progress));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = OnJpegError;
  err.pub.emit_message = OnJpegMessage;
  err.message[0] = '\0';
  ok = Guarded(this, CreateStep, nullptr);
  progress.progress_monitor = OnJpegProgress;
  if (ok) cinfo.progress = &progress;  // after create: it clears the struct
}

struct HeaderArgs {
  const uint8_t* data;
  size_t size;
};
void ReadHeaderStep(j_decompress_ptr c, void* arg) {
  const auto* a = static_cast<const HeaderArgs*>(arg);
  jpeg_mem_src(c, a->data, static_cast<unsigned long>(a->size));
  jpeg_read_header(c, TRUE);
}

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

// Returns the decompressor to its start state on every exit path.
struct AbortOnExit {
  jpeg_decompress_struct* cinfo;
  ~AbortOnExit() { jpeg_abort_decompress(cinfo); }
};

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

#endif  // STOKER_JPEG_REGION_DECODE

}  // namespace

struct JpegDecoder::Impl {
  TjHandle handle{tjInitDecompress()};
#if STOKER_JPEG_REGION_DECODE
  LibJpeg lj;
#endif
  bool region_decode = true;  // SetRegionDecode(false): TurboJPEG path only
  // Scratch, grown to the largest image seen and kept (one decoder per thread).
  std::vector<uint8_t> decoded;  // YUV planes (region or full) or full RGB/CMYK
  std::vector<uint8_t> planes;   // fallback: R, G, B planes of the decoded image
  std::vector<uint8_t> resized;  // 3 resized planes (Y,Cb,Cr or R,G,B)
  std::vector<uint8_t> rgb;      // resized region as HWC RGB
#if STOKER_JPEG_REGION_DECODE
  std::vector<JSAMPROW> row_ptrs;  // libjpeg's row pointers into `decoded`
#endif

  struct Header {
    int width, height, subsamp, colorspace;
  };
  Result<Header> ReadHeader(std::span<const uint8_t> jpeg) {
    if (!handle) return Internal("tjInitDecompress failed");
    if (jpeg.empty()) return DataLoss("JPEG is empty");
    Header h{};
    if (tjDecompressHeader3(handle.get(), jpeg.data(), jpeg.size(), &h.width, &h.height, &h.subsamp,
                            &h.colorspace) != 0) {
      return TjError(handle.get(), "header");
    }
    if (h.width <= 0 || h.height <= 0) return DataLoss("JPEG has no pixels");
    return h;
  }

  // Full-resolution (or DCT-scaled) interleaved RGB into `dst`, CMYK converted.
  Status DecodeRgbScaled(std::span<const uint8_t> jpeg, const Header& h, int sw, int sh, uint8_t* dst) {
    if (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) {
      uint8_t* cmyk = Grow(decoded, static_cast<size_t>(sw) * sh * 4);
      if (tjDecompress2(handle.get(), jpeg.data(), jpeg.size(), cmyk, sw, 0, sh, TJPF_CMYK, kDecodeFlags) != 0) {
        return TjError(handle.get(), "decode");
      }
      CmykToRgbLikePillow(cmyk, static_cast<size_t>(sw) * sh, dst);
      return Status::Ok();
    }
    if (tjDecompress2(handle.get(), jpeg.data(), jpeg.size(), dst, sw, 0, sh, TJPF_RGB, kDecodeFlags) != 0) {
      return TjError(handle.get(), "decode");
    }
    return Status::Ok();
  }

  // Region decode through libjpeg (file header). Returns false, having
  // touched nothing the caller sees, for a JPEG it does not handle; the
  // caller then takes the TurboJPEG path.
  Result<bool> DecodeRegion(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                            std::span<uint8_t> out);
  // TurboJPEG path: full planes (or full RGB), then the same crop/resize.
  Status DecodeFull(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                    std::span<uint8_t> out);
};

#if STOKER_JPEG_REGION_DECODE
namespace {
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

Status LibjpegError(const LibJpeg& lj, const char* what) {
  return DataLoss(std::string("JPEG ") + what + ": " + lj.err.message);
}
}  // namespace

Result<bool> JpegDecoder::Impl::DecodeRegion(std::span<const uint8_t> jpeg, const ImageSpec& spec,
                                             uint64_t sample_seed, std::span<uint8_t> out) {
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
  uint8_t* base = Grow(decoded, total);
  if (row_ptrs.size() < nrows) row_ptrs.resize(nrows);
  const uint8_t* src[3] = {};
  int stride[3] = {};
  JSAMPROW* rp = row_ptrs.data();
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
  uint8_t* res = Grow(resized, rplane * 3);
  uint8_t* out_rgb = Grow(rgb, rplane * 3);
  PlanesToRgb(src, stride, win, ncomp, subsamp, rw, rh, res, out_rgb);
  WriteOutput(out_rgb, rw, rh, spec, g.hflip, out);
  return true;
}
#else
Result<bool> JpegDecoder::Impl::DecodeRegion(std::span<const uint8_t>, const ImageSpec&, uint64_t,
                                             std::span<uint8_t>) {
  return false;
}
#endif  // STOKER_JPEG_REGION_DECODE

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}
JpegDecoder::~JpegDecoder() = default;

void JpegDecoder::SetRegionDecode(bool enabled) { impl_->region_decode = enabled; }

Result<JpegInfo> JpegDecoder::ReadInfo(std::span<const uint8_t> jpeg) {
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, impl_->ReadHeader(jpeg));
  JpegInfo info;
  info.width = h.width;
  info.height = h.height;
  info.components = h.colorspace == TJCS_GRAY ? 1 : (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) ? 4 : 3;
  return info;
}

// libjpeg-turbo leaves a TurboJPEG handle mid-decompression after a failed
// call (the next header read then reports 0x0 pixels): a failed decode gets a
// fresh one. (The libjpeg decompressor is reset by jpeg_abort_decompress.)
Status JpegDecoder::RenewOnError(Status status) {
  if (!status.ok()) impl_->handle.reset(tjInitDecompress());
  return status;
}

Status JpegDecoder::DecodeRgb(std::span<const uint8_t> jpeg, std::vector<uint8_t>* rgb, int* width,
                              int* height) {
  return RenewOnError(DecodeRgbOnce(jpeg, rgb, width, height));
}

Status JpegDecoder::DecodeInto(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                               std::span<uint8_t> out) {
  return RenewOnError(DecodeIntoOnce(jpeg, spec, sample_seed, out));
}

Status JpegDecoder::DecodeRgbOnce(std::span<const uint8_t> jpeg, std::vector<uint8_t>* rgb, int* width,
                                  int* height) {
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, impl_->ReadHeader(jpeg));
  rgb->resize(static_cast<size_t>(h.width) * h.height * 3);
  STOKER_RETURN_IF_ERROR(impl_->DecodeRgbScaled(jpeg, h, h.width, h.height, rgb->data()));
  *width = h.width;
  *height = h.height;
  return Status::Ok();
}

Status JpegDecoder::DecodeIntoOnce(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                                   std::span<uint8_t> out) {
  STOKER_RETURN_IF_ERROR(spec.Validate());
  if (out.size() != spec.OutputBytes()) {
    return InvalidArgument("output slot has " + std::to_string(out.size()) + " bytes, spec needs " +
                           std::to_string(spec.OutputBytes()));
  }
  if (impl_->region_decode && spec.mode != ResizeMode::kNone) {
    STOKER_ASSIGN_OR_RETURN(bool done, impl_->DecodeRegion(jpeg, spec, sample_seed, out));
    if (done) return Status::Ok();
  }
  return impl_->DecodeFull(jpeg, spec, sample_seed, out);
}

Status JpegDecoder::Impl::DecodeFull(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                                     std::span<uint8_t> out) {
  STOKER_ASSIGN_OR_RETURN(Header h, ReadHeader(jpeg));
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, h.width, h.height, sample_seed));
  const int rw = g.resized_w, rh = g.resized_h;
  const ScaledPlan p = PlanScale(spec, g, h.width, h.height);
  const int sw = p.sw, sh = p.sh;

  const size_t rplane = static_cast<size_t>(rw) * rh;
  uint8_t* res = Grow(resized, rplane * 3);
  uint8_t* out_rgb = Grow(rgb, rplane * 3);

  if (HasPlanarFastPath(h.subsamp, h.colorspace) && spec.mode != ResizeMode::kNone) {
    const int ncomp = h.subsamp == TJSAMP_GRAY ? 1 : 3;
    int pw[3], ph[3];
    size_t total = 0;
    for (int c = 0; c < ncomp; ++c) {
      pw[c] = tjPlaneWidth(c, sw, h.subsamp);
      ph[c] = tjPlaneHeight(c, sh, h.subsamp);
      total += static_cast<size_t>(pw[c]) * ph[c];
    }
    uint8_t* base = Grow(decoded, total);
    unsigned char* yuv[3] = {base, nullptr, nullptr};
    int strides[3] = {pw[0], 0, 0};
    for (int c = 1; c < ncomp; ++c) {
      yuv[c] = yuv[c - 1] + static_cast<size_t>(pw[c - 1]) * ph[c - 1];
      strides[c] = pw[c];
    }
    if (tjDecompressToYUVPlanes(handle.get(), jpeg.data(), jpeg.size(), yuv, sw, strides, sh, kDecodeFlags) != 0) {
      return TjError(handle.get(), "decode");
    }
    FillLumaPad(yuv[0], strides[0], 0, 0, pw[0], ph[0], DecodedLuma(h.width, p.denom),
                DecodedLuma(h.height, p.denom));
    const uint8_t* src[3] = {};
    PlaneWindow win[3];
    for (int c = 0; c < ncomp; ++c) {
      win[c] = PlaneCrop(p, pw[c], ph[c]);
      src[c] = yuv[c] + static_cast<size_t>(win[c].y0) * strides[c] + win[c].x0;
    }
    PlanesToRgb(src, strides, win, ncomp, h.subsamp, rw, rh, res, out_rgb);
  } else {
    // Fallback and mode kNone: interleaved RGB from TurboJPEG.
    const size_t full = static_cast<size_t>(sw) * sh;
    if (spec.mode == ResizeMode::kNone) {
      // No resize: decode straight into the RGB scratch the writer reads.
      out_rgb = Grow(rgb, full * 3);
      STOKER_RETURN_IF_ERROR(DecodeRgbScaled(jpeg, h, sw, sh, out_rgb));
    } else {
      uint8_t* rgb_full = Grow(planes, full * 6);  // [RGB interleaved | R | G | B]
      STOKER_RETURN_IF_ERROR(DecodeRgbScaled(jpeg, h, sw, sh, rgb_full));
      uint8_t* pr = rgb_full + full * 3;
      libyuv::SplitRGBPlane(rgb_full, sw * 3, pr, sw, pr + full, sw, pr + 2 * full, sw, sw, sh);
      for (int c = 0; c < 3; ++c) {
        ResizePlane(pr + c * full + static_cast<size_t>(p.cy0) * sw + p.cx0, sw, p.cw, p.ch, res + c * rplane, rw,
                    rw, rh);
      }
      libyuv::MergeRGBPlane(res, rw, res + rplane, rw, res + 2 * rplane, rw, out_rgb, rw * 3, rw, rh);
    }
  }
  WriteOutput(out_rgb, rw, rh, spec, g.hflip, out);
  return Status::Ok();
}

Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* pixels, int width, int height, int channels,
                                        int quality, int subsampling) {
  if (pixels == nullptr || width <= 0 || height <= 0) return InvalidArgument("EncodeJpeg: empty image");
  if (channels != 1 && channels != 3) return InvalidArgument("EncodeJpeg: channels must be 1 or 3");
  if (quality < 1 || quality > 100) return InvalidArgument("EncodeJpeg: quality must be in 1..100");
  int samp;
  switch (subsampling) {
    case 444: samp = TJSAMP_444; break;
    case 422: samp = TJSAMP_422; break;
    case 420: samp = TJSAMP_420; break;
    default: return InvalidArgument("EncodeJpeg: subsampling must be 444, 422 or 420");
  }
  if (channels == 1) samp = TJSAMP_GRAY;
  TjHandle h(tjInitCompress());
  if (!h) return Internal("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h.get(), pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, samp,
                  quality, 0) != 0) {
    Status s = Internal(std::string("JPEG encode: ") + tjGetErrorStr2(h.get()));
    tjFree(buf);
    return s;
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

}  // namespace stoker
