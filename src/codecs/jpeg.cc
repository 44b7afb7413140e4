// codecs/jpeg.cc — JpegDecoder: picks the decode path and runs the
// TurboJPEG one (see jpeg.h).
//
// DecodeInto first tries the region path (jpeg_region.cc: libjpeg, IDCT only
// on the crop's iMCU rows/columns); a JPEG it does not take comes here.
// TurboJPEG path (CMYK/YCCK, RGB-coded, 4:1:1 and other layouts, mode kNone,
//   and the reference for tests): tjDecompressToYUVPlanes for full planes, or
//   tjDecompress2 to RGB (or CMYK, converted like Pillow) at the same DCT
//   scale, split to planes, same crop (scaled_crop.h) and resize, then the
//   same output write (pixel_output.h).
// A JPEG whose header TurboJPEG refuses (a sampling layout it cannot name,
//   e.g. Pillow's 4:2:0 CMYK) but libjpeg reads takes that same interleaved
//   RGB route, decoded by jpeg_fallback.h instead of tjDecompress2.
// Full-size DecodeRgb uses TurboJPEG's defaults (ISLOW IDCT, fancy
// upsampling), which is what Pillow does, so the two agree bit for bit.
// Warnings (e.g. truncated data) are errors on both paths: a libjpeg warning
// jumps out like an error (TJFLAG_STOPONWARNING on the TurboJPEG side).
// Thread-safety: a JpegDecoder belongs to one thread.
#include "codecs/jpeg.h"

#include <libyuv.h>
#include <turbojpeg.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "codecs/decode_scratch.h"
#include "codecs/jpeg_fallback.h"
#include "codecs/jpeg_raw_resample.h"
#include "codecs/jpeg_region.h"
#include "codecs/jpeg_rgb_region.h"
#include "codecs/libjpeg_decompressor.h"
#include "codecs/pixel_output.h"
#include "codecs/resample.h"
#include "codecs/resize.h"
#include "codecs/rgb_window.h"
#include "codecs/sample_geometry.h"
#include "codecs/scaled_crop.h"
#include "codecs/turbojpeg_handle.h"

namespace stoker {
namespace {

// STOPONWARNING: a truncated or corrupt stream is a DataLoss, not a gray
// patch. LIMITSCANS: a progressive JPEG with >500 scans is a decompression
// bomb, not an image.
constexpr int kDecodeFlags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;

Status TjError(tjhandle h, const char* what) {
  return DataLoss(std::string("JPEG ") + what + ": " + tjGetErrorStr2(h));
}

bool HasPlanarFastPath(int subsamp, int colorspace) {
  if (colorspace == TJCS_GRAY) return subsamp == TJSAMP_GRAY;
  if (colorspace != TJCS_YCbCr) return false;
  return subsamp == TJSAMP_444 || subsamp == TJSAMP_422 || subsamp == TJSAMP_420 ||
         subsamp == TJSAMP_440;
}

}  // namespace

struct JpegDecoder::Impl {
  TjHandle handle{tjInitDecompress()};
  LibJpeg lj;                 // the region path's and the fallback's decompressor
  bool region_decode = true;  // SetRegionDecode(false): TurboJPEG path only
  DecodeScratch scratch;      // grown to the largest image seen and kept
  GeometryResample resample_plan;  // the Pillow-exact path's plan, reused
  int last_width = 0, last_height = 0;  // LastSize: set by ReadHeader

  struct Header {
    int width, height, subsamp, colorspace;
    bool libjpeg;  // TurboJPEG refused the header: decode through jpeg_fallback.h
  };
  Result<Header> ReadHeader(std::span<const uint8_t> jpeg) {
    if (!handle) return Internal("tjInitDecompress failed");
    if (jpeg.empty()) return DataLoss("JPEG is empty");
    Header h{};
    if (tjDecompressHeader3(handle.get(), jpeg.data(), jpeg.size(), &h.width, &h.height, &h.subsamp,
                            &h.colorspace) != 0) {
      Status tj_error = TjError(handle.get(), "header");
      handle.reset(tjInitDecompress());  // whatever state the failed call left it in
      // When libjpeg cannot read it either, TurboJPEG's message is the one
      // users have always seen for a broken file.
      Result<LibjpegInfo> info = ReadLibjpegInfo(lj, jpeg);
      if (!info.ok()) return tj_error;
      h.width = info->width;
      h.height = info->height;
      h.subsamp = -1;  // no TJSAMP_*: never the planar path
      h.colorspace = info->gray ? TJCS_GRAY : info->cmyk ? TJCS_CMYK : TJCS_YCbCr;
      h.libjpeg = true;
    }
    if (h.width <= 0 || h.height <= 0) return DataLoss("JPEG has no pixels");
    last_width = h.width;
    last_height = h.height;
    return h;
  }

  // Interleaved RGB at DCT scale 1/denom (sw x sh) into `dst`, CMYK converted.
  Status DecodeRgbScaled(std::span<const uint8_t> jpeg, const Header& h, int denom, int sw, int sh, uint8_t* dst) {
    if (h.libjpeg) return DecodeRgbLibjpeg(lj, jpeg, denom, sw, sh, scratch.decoded, dst);
    if (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) {
      uint8_t* cmyk = Grow(scratch.decoded, static_cast<size_t>(sw) * sh * 4);
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

  // Pillow-exact path (resample bilinear/bicubic): RGB as Pillow decodes it
  // (DCT-scaled only within ChooseResampleDenom's bound), then resample.h.
  Status DecodeResampled(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                         std::span<uint8_t> out);

  // TurboJPEG path: full planes (or full RGB), then the same crop/resize.
  Status DecodeFull(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                    std::span<uint8_t> out);
};

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

Status JpegDecoder::DecodeRgbInto(std::span<const uint8_t> jpeg, std::span<uint8_t> out, int* width,
                                  int* height) {
  return RenewOnError(DecodeRgbIntoOnce(jpeg, out, width, height));
}

Status JpegDecoder::DecodeInto(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                               std::span<uint8_t> out) {
  return RenewOnError(DecodeIntoOnce(jpeg, spec, sample_seed, out));
}

Status JpegDecoder::DecodeRgbOnce(std::span<const uint8_t> jpeg, std::vector<uint8_t>* rgb, int* width,
                                  int* height) {
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, impl_->ReadHeader(jpeg));
  rgb->resize(static_cast<size_t>(h.width) * h.height * 3);
  STOKER_RETURN_IF_ERROR(impl_->DecodeRgbScaled(jpeg, h, 1, h.width, h.height, rgb->data()));
  *width = h.width;
  *height = h.height;
  return Status::Ok();
}

Status JpegDecoder::DecodeRgbIntoOnce(std::span<const uint8_t> jpeg, std::span<uint8_t> out, int* width,
                                      int* height) {
  STOKER_ASSIGN_OR_RETURN(Impl::Header h, impl_->ReadHeader(jpeg));
  *width = h.width;
  *height = h.height;
  const size_t need = static_cast<size_t>(h.width) * h.height * 3;
  if (out.size() != need) {
    return InvalidArgument("output has " + std::to_string(out.size()) + " bytes, a " + std::to_string(h.width) +
                           "x" + std::to_string(h.height) + " RGB image needs " + std::to_string(need));
  }
  return impl_->DecodeRgbScaled(jpeg, h, 1, h.width, h.height, out.data());
}

void JpegDecoder::LastSize(int* width, int* height) const {
  *width = impl_->last_width;
  *height = impl_->last_height;
}

Status JpegDecoder::DecodeIntoOnce(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                                   std::span<uint8_t> out) {
  impl_->last_width = impl_->last_height = 0;
  STOKER_RETURN_IF_ERROR(spec.Validate());
  if (out.size() != spec.OutputBytes()) {
    return InvalidArgument("output slot has " + std::to_string(out.size()) + " bytes, spec needs " +
                           std::to_string(spec.OutputBytes()));
  }
  if (spec.resample != Resample::kBox && spec.mode != ResizeMode::kNone) {
    return impl_->DecodeResampled(jpeg, spec, sample_seed, out);
  }
  if (impl_->region_decode && spec.mode != ResizeMode::kNone) {
    STOKER_ASSIGN_OR_RETURN(bool done, DecodeRegion(impl_->lj, impl_->scratch, jpeg, spec, sample_seed, out));
    if (done) return Status::Ok();
  }
  return impl_->DecodeFull(jpeg, spec, sample_seed, out);
}

Status JpegDecoder::Impl::DecodeResampled(std::span<const uint8_t> jpeg, const ImageSpec& spec,
                                          uint64_t sample_seed, std::span<uint8_t> out) {
  STOKER_ASSIGN_OR_RETURN(Header h, ReadHeader(jpeg));
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, h.width, h.height, sample_seed));
  const int denom = ChooseResampleDenom(g);
  const tjscalingfactor sf{1, denom};
  const int sw = TJSCALED(h.width, sf), sh = TJSCALED(h.height, sf);
  GeometryResample& plan = resample_plan;  // its vectors keep their capacity: no allocation per image
  PlanGeometryResample(g, spec.resample, denom, sw, sh, &plan);
  uint8_t* rgb = Grow(scratch.rgb, static_cast<size_t>(g.win_w) * g.win_h * 3);
  const bool cmyk = h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK;
  if (region_decode && !cmyk && denom == 1) {
    // Raw planes of only the iMCUs the filter reaches, libjpeg's upsampling
    // and color conversion redone row by row on the columns it reads.
    // A CHW uint8 slot the window fills exactly takes the planes as they
    // are; otherwise rows of R, G, B values go through the output writer.
    const bool direct = spec.pixel == PixelType::kUint8 && spec.chw && !g.hflip && g.win_w == spec.width &&
                        g.win_h == spec.height;
    const size_t win_row = static_cast<size_t>(g.win_w) * 3;
    const PlanarOut planar = direct ? PlanarOut{out.data(), static_cast<size_t>(spec.width),
                                                static_cast<size_t>(spec.width) * spec.height}
                                    : PlanarOut{rgb, win_row, static_cast<size_t>(g.win_w)};
    STOKER_ASSIGN_OR_RETURN(const RawResampled done, DecodeRawResampled(lj, scratch, jpeg, plan, planar, rgb, win_row));
    if (done != RawResampled::kNotHandled) {
      if (done == RawResampled::kHwc) {
        WriteOutput(rgb, g.win_w, g.win_h, spec, g.hflip, out);
      } else if (!direct) {
        WriteOutputPlanarRows(rgb, win_row, g.win_w, g.win_h, spec, g.hflip, out);
      }
      return Status::Ok();
    }
  }
  if (region_decode && !cmyk && plan.ax.src_hi > plan.ax.src_lo && plan.ay.src_hi > plan.ay.src_lo) {
    // Only the source rectangle the filter reaches (decoded-image pixels).
    RgbRegion r;
    STOKER_RETURN_IF_ERROR(DecodeRgbRegion(lj, jpeg, denom, plan.ax.src_lo - plan.src_x0,
                                           plan.ax.src_hi - plan.src_x0, plan.ay.src_lo - plan.src_y0,
                                           plan.ay.src_hi - plan.src_y0, scratch.planes, &r));
    ResampleRgb(plan.ax, plan.ay, r.data, r.stride, plan.src_x0 + r.x0, plan.src_y0 + r.y0, rgb,
                static_cast<size_t>(g.win_w) * 3, &scratch.resample_tmp);
  } else {
    uint8_t* decoded = Grow(scratch.planes, static_cast<size_t>(sw) * sh * 3 + 16);
    STOKER_RETURN_IF_ERROR(DecodeRgbScaled(jpeg, h, denom, sw, sh, decoded));
    ResampleRgb(plan.ax, plan.ay, decoded, static_cast<size_t>(sw) * 3, plan.src_x0, plan.src_y0, rgb,
                static_cast<size_t>(g.win_w) * 3, &scratch.resample_tmp);
  }
  WriteOutput(rgb, g.win_w, g.win_h, spec, g.hflip, out);
  return Status::Ok();
}

Status JpegDecoder::Impl::DecodeFull(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                                     std::span<uint8_t> out) {
  STOKER_ASSIGN_OR_RETURN(Header h, ReadHeader(jpeg));
  STOKER_ASSIGN_OR_RETURN(SampleGeometry g, PlanSample(spec, h.width, h.height, sample_seed));
  const int rw = g.resized_w, rh = g.resized_h;
  const ScaledPlan p = PlanScale(spec, g, h.width, h.height);
  const int sw = p.sw, sh = p.sh;

  const size_t rplane = static_cast<size_t>(rw) * rh;
  if (HasPlanarFastPath(h.subsamp, h.colorspace) && spec.mode != ResizeMode::kNone) {
    const int ncomp = h.subsamp == TJSAMP_GRAY ? 1 : 3;
    int pw[3], ph[3];
    size_t total = 0;
    for (int c = 0; c < ncomp; ++c) {
      pw[c] = tjPlaneWidth(c, sw, h.subsamp);
      ph[c] = tjPlaneHeight(c, sh, h.subsamp);
      total += static_cast<size_t>(pw[c]) * ph[c];
    }
    uint8_t* base = Grow(scratch.decoded, total);
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
    uint8_t* res = Grow(scratch.resized, rplane * 3);
    uint8_t* out_rgb = Grow(scratch.rgb, rplane * 3);
    PlanesToRgb(src, strides, win, ncomp, h.subsamp, rw, rh, res, out_rgb);
    WriteOutput(out_rgb, rw, rh, spec, g.hflip, out);
  } else {
    // Fallback and mode kNone: interleaved RGB from TurboJPEG, then the
    // path every full-RGB decoder shares (rgb_window.h).
    const size_t full = static_cast<size_t>(sw) * sh;
    uint8_t* rgb_full = Grow(scratch.full_rgb, full * 3);
    STOKER_RETURN_IF_ERROR(DecodeRgbScaled(jpeg, h, p.denom, sw, sh, rgb_full));
    RgbWindowToOutput(rgb_full, p, rw, rh, spec, g.hflip, scratch, out);
  }
  return Status::Ok();
}

}  // namespace stoker
