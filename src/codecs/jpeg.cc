// codecs/jpeg.cc — JPEG decode/encode through TurboJPEG (see jpeg.h).
//
// Fast path (YCbCr or gray JPEGs in 4:4:4, 4:2:2, 4:2:0, 4:4:0):
//   header -> PlanSample (crop, size, flip) -> DCT scale 1/8..1/2 when the
//   scaled crop stays >= the output -> tjDecompressToYUVPlanes (no chroma
//   upsampling, no color conversion at full size) -> crop each plane by
//   pointer offset -> ResizePlane each plane (chroma keeps its subsampling,
//   so it costs a quarter of luma) -> one small full-range BT.601
//   YCbCr->RGB at output size with bilinear chroma upsampling (libyuv,
//   "JPEG" matrix) -> layout/dtype/flip/pad into the caller's slot.
// Measured (bench/decode_bench.cc): the YUV decode alone is ~1.18x a full
//   RGB decode; resize+convert+write take ~15-20% of a decode on top.
//   TJFLAG_FASTDCT did not help measurably, so the IDCT stays ISLOW.
// Fallback (CMYK/YCCK, RGB-coded, 4:1:1 and other layouts): tjDecompress2 to
//   RGB (or CMYK, converted like Pillow) at the same DCT scale, split to
//   planes, same crop/resize.
// Full-size DecodeRgb uses TurboJPEG's defaults (ISLOW IDCT, fancy
// upsampling), which is what Pillow does, so the two agree bit for bit.
// Warnings (e.g. truncated data) are errors: TJFLAG_STOPONWARNING.
// Thread-safety: a JpegDecoder belongs to one thread; EncodeJpeg is
// reentrant (it makes its own handle).
#include "codecs/jpeg.h"

#include <libyuv.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "codecs/resize.h"
#include "codecs/sample_geometry.h"

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

}  // namespace

struct JpegDecoder::Impl {
  TjHandle handle{tjInitDecompress()};
  // Scratch, grown to the largest image seen and kept (one decoder per thread).
  std::vector<uint8_t> decoded;  // YUV planes or full RGB/CMYK from TurboJPEG
  std::vector<uint8_t> planes;   // fallback: R, G, B planes of the decoded image
  std::vector<uint8_t> resized;  // 3 resized planes (Y,Cb,Cr or R,G,B)
  std::vector<uint8_t> rgb;      // resized region as HWC RGB

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
};

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}
JpegDecoder::~JpegDecoder() = default;

Result<JpegInfo> JpegDecoder::ReadInfo(std::span<const uint8_t> jpeg) {
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, impl_->ReadHeader(jpeg));
  JpegInfo info;
  info.width = h.width;
  info.height = h.height;
  info.components = h.colorspace == TJCS_GRAY ? 1 : (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) ? 4 : 3;
  return info;
}

// libjpeg-turbo leaves a handle mid-decompression after a failed call (the
// next header read then reports 0x0 pixels): a failed decode gets a fresh one.
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
  Impl& im = *impl_;
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, im.ReadHeader(jpeg));
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, h.width, h.height, sample_seed));
  const int rw = g.resized_w, rh = g.resized_h;

  // DCT scaling: the largest of 1/8, 1/4, 1/2 whose scaled crop still holds
  // at least the output pixels (so we only ever shrink after it). Other
  // factors (5/8, 3/4...) have no SIMD IDCT here and lose to a full decode.
  int denom = 1;
  if (spec.mode != ResizeMode::kNone) {
    for (int d : {8, 4, 2}) {
      if (static_cast<int64_t>(g.crop_w) >= static_cast<int64_t>(rw) * d &&
          static_cast<int64_t>(g.crop_h) >= static_cast<int64_t>(rh) * d) {
        denom = d;
        break;
      }
    }
  }
  const tjscalingfactor sf{1, denom};
  const int sw = TJSCALED(h.width, sf), sh = TJSCALED(h.height, sf);
  // Crop in scaled pixels; the window is widened outward to whole pixels.
  const int cx0 = static_cast<int>(static_cast<int64_t>(g.crop_x) * sw / h.width);
  const int cy0 = static_cast<int>(static_cast<int64_t>(g.crop_y) * sh / h.height);
  const int cx1 = std::min<int>(sw, static_cast<int>((static_cast<int64_t>(g.crop_x + g.crop_w) * sw + h.width - 1) / h.width));
  const int cy1 = std::min<int>(sh, static_cast<int>((static_cast<int64_t>(g.crop_y + g.crop_h) * sh + h.height - 1) / h.height));
  const int cw = std::max(1, cx1 - cx0), ch = std::max(1, cy1 - cy0);

  const size_t rplane = static_cast<size_t>(rw) * rh;
  uint8_t* res = Grow(im.resized, rplane * 3);
  uint8_t* rgb = Grow(im.rgb, rplane * 3);

  if (HasPlanarFastPath(h.subsamp, h.colorspace) && spec.mode != ResizeMode::kNone) {
    const int ncomp = h.subsamp == TJSAMP_GRAY ? 1 : 3;
    int pw[3], ph[3];
    size_t total = 0;
    for (int c = 0; c < ncomp; ++c) {
      pw[c] = tjPlaneWidth(c, sw, h.subsamp);
      ph[c] = tjPlaneHeight(c, sh, h.subsamp);
      total += static_cast<size_t>(pw[c]) * ph[c];
    }
    uint8_t* base = Grow(im.decoded, total);
    unsigned char* planes[3] = {base, nullptr, nullptr};
    int strides[3] = {pw[0], 0, 0};
    for (int c = 1; c < ncomp; ++c) {
      planes[c] = planes[c - 1] + static_cast<size_t>(pw[c - 1]) * ph[c - 1];
      strides[c] = pw[c];
    }
    if (tjDecompressToYUVPlanes(im.handle.get(), jpeg.data(), jpeg.size(), planes, sw, strides, sh,
                                kDecodeFlags) != 0) {
      return TjError(im.handle.get(), "decode");
    }
    // Chroma keeps its subsampling through the resize (4:2:0 -> a 4:2:0
    // result) so it costs a quarter of luma; libyuv's *MatrixFilter
    // converters then upsample it bilinearly, not by replication. 4:4:0 has
    // no libyuv converter, so its chroma is resized to full size (4:4:4).
    const bool half_w = h.subsamp == TJSAMP_420 || h.subsamp == TJSAMP_422;
    const bool half_h = h.subsamp == TJSAMP_420;
    const int tw[3] = {rw, half_w ? (rw + 1) / 2 : rw, half_w ? (rw + 1) / 2 : rw};
    const int th[3] = {rh, half_h ? (rh + 1) / 2 : rh, half_h ? (rh + 1) / 2 : rh};
    uint8_t* rp[3] = {res, res + rplane, res + 2 * rplane};
    for (int c = 0; c < ncomp; ++c) {
      // Chroma planes are smaller by the subsampling factor; map the crop
      // window into each plane's own pixels.
      const int px0 = static_cast<int>(static_cast<int64_t>(cx0) * pw[c] / sw);
      const int py0 = static_cast<int>(static_cast<int64_t>(cy0) * ph[c] / sh);
      const int px1 = std::min<int>(pw[c], static_cast<int>((static_cast<int64_t>(cx0 + cw) * pw[c] + sw - 1) / sw));
      const int py1 = std::min<int>(ph[c], static_cast<int>((static_cast<int64_t>(cy0 + ch) * ph[c] + sh - 1) / sh));
      ResizePlane(planes[c] + static_cast<size_t>(py0) * strides[c] + px0, strides[c],
                  std::max(1, px1 - px0), std::max(1, py1 - py0), rp[c], tw[c], tw[c], th[c]);
    }
    // libyuv's RGB24 is B,G,R in memory; swapping U/V and using the mirrored
    // (Yvu) matrix yields R,G,B, the same trick as its I444ToRAW.
    const libyuv::YuvConstants* yvu = &libyuv::kYvuJPEGConstants;
    if (ncomp == 1) {
      for (size_t i = 0; i < rplane; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = res[i];
    } else if (h.subsamp == TJSAMP_420) {
      libyuv::I420ToRGB24MatrixFilter(rp[0], rw, rp[2], tw[2], rp[1], tw[1], rgb, rw * 3, yvu, rw, rh,
                                      libyuv::kFilterBilinear);
    } else if (h.subsamp == TJSAMP_422) {
      libyuv::I422ToRGB24MatrixFilter(rp[0], rw, rp[2], tw[2], rp[1], tw[1], rgb, rw * 3, yvu, rw, rh,
                                      libyuv::kFilterBilinear);
    } else {
      libyuv::I444ToRGB24Matrix(rp[0], rw, rp[2], rw, rp[1], rw, rgb, rw * 3, yvu, rw, rh);
    }
  } else {
    // Fallback and mode kNone: interleaved RGB from TurboJPEG.
    const size_t full = static_cast<size_t>(sw) * sh;
    if (spec.mode == ResizeMode::kNone) {
      // No resize: decode straight into the RGB scratch the writer reads.
      rgb = Grow(im.rgb, full * 3);
      STOKER_RETURN_IF_ERROR(im.DecodeRgbScaled(jpeg, h, sw, sh, rgb));
    } else {
      uint8_t* rgb_full = Grow(im.planes, full * 6);  // [RGB interleaved | R | G | B]
      STOKER_RETURN_IF_ERROR(im.DecodeRgbScaled(jpeg, h, sw, sh, rgb_full));
      uint8_t* pr = rgb_full + full * 3;
      libyuv::SplitRGBPlane(rgb_full, sw * 3, pr, sw, pr + full, sw, pr + 2 * full, sw, sw, sh);
      for (int c = 0; c < 3; ++c) {
        ResizePlane(pr + c * full + static_cast<size_t>(cy0) * sw + cx0, sw, cw, ch, res + c * rplane, rw,
                    rw, rh);
      }
      libyuv::MergeRGBPlane(res, rw, res + rplane, rw, res + 2 * rplane, rw, rgb, rw * 3, rw, rh);
    }
  }
  WriteOutput(rgb, rw, rh, spec, g.hflip, out);
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
