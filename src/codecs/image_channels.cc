// codecs/image_channels.cc — see header.
#include "codecs/image_channels.h"

#include <spng.h>
#include <webp/decode.h>

#include <cstring>
#include <memory>
#include <string>

#include "codecs/image_format.h"

namespace stoker {

void RgbToLLikePillow(const uint8_t* rgb, size_t pixels, uint8_t* l) {
  for (size_t i = 0; i < pixels; ++i) {
    const uint32_t v = rgb[3 * i] * 19595u + rgb[3 * i + 1] * 38470u + rgb[3 * i + 2] * 7471u + 0x8000u;
    l[i] = static_cast<uint8_t>(v >> 16);
  }
}

Status DecodeAlpha(std::span<const uint8_t> bytes, int width, int height, std::vector<uint8_t>& alpha) {
  const size_t n = static_cast<size_t>(width) * static_cast<size_t>(height);
  alpha.assign(n, 255);
  std::vector<uint8_t> rgba(n * 4);
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng: {
      std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> c(spng_ctx_new(0), &spng_ctx_free);
      if (!c) return Internal("libspng could not allocate a context");
      spng_set_png_buffer(c.get(), bytes.data(), bytes.size());
      spng_ihdr ihdr{};
      if (int e = spng_get_ihdr(c.get(), &ihdr)) return DataLoss(std::string("PNG alpha: ") + spng_strerror(e));
      if (static_cast<int>(ihdr.width) != width || static_cast<int>(ihdr.height) != height) {
        return DataLoss("PNG alpha: the image's size changed between decodes");
      }
      if (int e = spng_decode_image(c.get(), rgba.data(), rgba.size(), SPNG_FMT_RGBA8, SPNG_DECODE_TRNS)) {
        return DataLoss(std::string("PNG alpha: ") + spng_strerror(e));
      }
      break;
    }
    case ImageFormat::kWebp:
      if (WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(), width * 4) == nullptr) {
        return DataLoss("WebP alpha: libwebp could not decode the image");
      }
      break;
    default:
      return Status::Ok();  // JPEG: no alpha
  }
  for (size_t i = 0; i < n; ++i) alpha[i] = rgba[4 * i + 3];
  return Status::Ok();
}

void WriteChannels(const uint8_t* hwc, int h, int w, const ImageSpec& spec, uint8_t* out) {
  const int c = spec.channels;
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
  if (spec.pixel == PixelType::kUint8) {
    if (!spec.chw || c == 1) {
      std::memcpy(out, hwc, plane * c);
      return;
    }
    for (int k = 0; k < c; ++k)
      for (size_t i = 0; i < plane; ++i) out[k * plane + i] = hwc[i * c + k];
    return;
  }
  float lut[4][256];
  for (int k = 0; k < c; ++k) {
    const bool norm = spec.normalize && k < 3;
    const float mean = norm ? spec.mean[k] : 0.0f;
    const float inv_std = norm ? 1.0f / spec.std[k] : 1.0f;
    for (int v = 0; v < 256; ++v) lut[k][v] = (static_cast<float>(v) / 255.0f - mean) * inv_std;
  }
  float* f = reinterpret_cast<float*>(out);
  for (size_t i = 0; i < plane; ++i)
    for (int k = 0; k < c; ++k) f[spec.chw ? k * plane + i : i * c + k] = lut[k][hwc[i * c + k]];
}

}  // namespace stoker
