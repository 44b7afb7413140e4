// codecs/pixel_output.cc — planes/CMYK to RGB and the output write (see header).
// Thread-safety: pure functions.
#include "codecs/pixel_output.h"

#include <libyuv.h>
#include <turbojpeg.h>

#include <cstring>

#include "codecs/resize.h"

namespace stoker {
namespace {

// Pillow's MULDIV255: a*b/255 rounded, without a division.
inline uint8_t MulDiv255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

// A byte's float value per channel: x/255, then (x - mean) / std when
// normalizing, in the same expression order as torchvision's ToTensor + Normalize.
void FloatLut(const ImageSpec& spec, float lut[3][256]) {
  for (int c = 0; c < 3; ++c) {
    const float mean = spec.normalize ? spec.mean[c] : 0.0f;
    const float inv_std = spec.normalize ? 1.0f / spec.std[c] : 1.0f;
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.0f - mean) * inv_std;
  }
}

}  // namespace

void CmykToRgbLikePillow(const uint8_t* cmyk, size_t pixels, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i) {
    const int c = 255 - cmyk[4 * i], m = 255 - cmyk[4 * i + 1], y = 255 - cmyk[4 * i + 2];
    const int nk = cmyk[4 * i + 3];  // 255 - (255 - stored k)
    rgb[3 * i] = static_cast<uint8_t>(nk - MulDiv255(c, nk));
    rgb[3 * i + 1] = static_cast<uint8_t>(nk - MulDiv255(m, nk));
    rgb[3 * i + 2] = static_cast<uint8_t>(nk - MulDiv255(y, nk));
  }
}

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
  FloatLut(spec, lut);
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

void WriteOutputPlanarRows(const uint8_t* rows, size_t row_stride, int rw, int rh, const ImageSpec& spec, bool hflip,
                           std::span<uint8_t> out) {
  const int W = spec.width, H = spec.height;
  const size_t plane = static_cast<size_t>(W) * H;
  if (rw != W || rh != H) std::memset(out.data(), 0, out.size());
  // Source x of output x.
  auto sx = [&](int x) { return hflip ? rw - 1 - x : x; };
  if (spec.pixel == PixelType::kUint8) {
    uint8_t* o = out.data();
    for (int y = 0; y < rh; ++y) {
      const uint8_t* s = rows + y * row_stride;
      if (spec.chw) {
        for (int c = 0; c < 3; ++c) {
          uint8_t* d = o + c * plane + static_cast<size_t>(y) * W;
          const uint8_t* p = s + static_cast<size_t>(c) * rw;
          if (!hflip) {
            std::memcpy(d, p, rw);
          } else {
            for (int x = 0; x < rw; ++x) d[x] = p[rw - 1 - x];
          }
        }
      } else {
        uint8_t* d = o + static_cast<size_t>(y) * W * 3;
        if (!hflip) {
          libyuv::MergeRGBPlane(s, rw, s + rw, rw, s + 2 * rw, rw, d, rw * 3, rw, 1);
        } else {
          for (int x = 0; x < rw; ++x) {
            for (int c = 0; c < 3; ++c) d[3 * x + c] = s[c * rw + sx(x)];
          }
        }
      }
    }
    return;
  }
  float lut[3][256];
  FloatLut(spec, lut);
  // `out` is a slot of a batch buffer of floats, hence 4-byte aligned.
  float* o = reinterpret_cast<float*>(out.data());
  for (int y = 0; y < rh; ++y) {
    const uint8_t* s = rows + y * row_stride;
    for (int c = 0; c < 3; ++c) {
      const uint8_t* p = s + static_cast<size_t>(c) * rw;
      for (int x = 0; x < rw; ++x) {
        const float v = lut[c][p[sx(x)]];
        if (spec.chw) {
          o[c * plane + static_cast<size_t>(y) * W + x] = v;
        } else {
          o[(static_cast<size_t>(y) * W + x) * 3 + c] = v;
        }
      }
    }
  }
}

}  // namespace stoker
