// codecs/png.cc — PNG decode with libspng (see header); the common 8-bit
// kinds go through codecs/png_fast.h first, libspng takes the rest and errors.
// libspng's SPNG_FMT_RGB8 does palette expansion, gray replication and
// alpha stripping like Pillow for 8-bit and lower depths; 16-bit images are
// decoded in their own format (host-endian) and reduced here, because
// Pillow's rules for them (high byte; gray clipped) are its own.
// Thread-safety: stateless.
#include "codecs/png.h"

#include "codecs/png_fast.h"

#include <spng.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace stoker {
namespace {

struct CtxFree {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};

Status SpngError(int err, const char* what) {
  return DataLoss(std::string("PNG ") + what + ": " + spng_strerror(err));
}

constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

}  // namespace

Status DecodePngRgb(std::span<const uint8_t> png, std::vector<uint8_t>& rgb, int* width, int* height) {
  // STOKER_PNG_DECODER=spng: libspng for every PNG (an A/B of the two paths,
  // or a way around a suspected difference in the fast one).
  static const bool spng_only = [] {
    const char* v = std::getenv("STOKER_PNG_DECODER");
    return v && std::string_view(v) == "spng";
  }();
  if (!spng_only && DecodePngRgbFast(png, rgb, width, height)) return Status::Ok();  // 8-bit kinds, libdeflate
  std::unique_ptr<spng_ctx, CtxFree> ctx(spng_ctx_new(0));
  if (!ctx) return Internal("spng_ctx_new failed");
  spng_ctx* c = ctx.get();
  // A damaged ancillary chunk is skipped (as Pillow does); a damaged
  // critical one (IHDR, PLTE, IDAT) is an error.
  spng_set_crc_action(c, SPNG_CRC_ERROR, SPNG_CRC_DISCARD);
  spng_set_chunk_limits(c, size_t{64} << 20, size_t{64} << 20);
  if (int e = spng_set_png_buffer(c, png.data(), png.size())) return SpngError(e, "buffer");
  spng_ihdr ihdr{};
  if (int e = spng_get_ihdr(c, &ihdr)) return SpngError(e, "header");
  if (ihdr.width == 0 || ihdr.height == 0) return DataLoss("PNG has no pixels");
  const uint64_t pixels = static_cast<uint64_t>(ihdr.width) * ihdr.height;
  if (pixels > kMaxPixels) {
    return DataLoss("PNG is " + std::to_string(ihdr.width) + "x" + std::to_string(ihdr.height) +
                    ", more than the 2^28-pixel limit");
  }
  const int w = static_cast<int>(ihdr.width), h = static_cast<int>(ihdr.height);
  *width = w;
  *height = h;
  const size_t n = static_cast<size_t>(pixels);
  if (rgb.size() < n * 3) rgb.resize(n * 3);
  rgb.resize(n * 3);  // exact size; capacity kept
  if (ihdr.bit_depth != 16) {
    if (int e = spng_decode_image(c, rgb.data(), n * 3, SPNG_FMT_RGB8, 0)) return SpngError(e, "decode");
    return Status::Ok();
  }
  // 16-bit: decode as stored (host-endian uint16 samples), then reduce.
  size_t len = 0;
  if (int e = spng_decoded_image_size(c, SPNG_FMT_PNG, &len)) return SpngError(e, "size");
  std::vector<uint16_t> raw(len / 2);
  if (int e = spng_decode_image(c, raw.data(), len, SPNG_FMT_PNG, 0)) return SpngError(e, "decode");
  uint8_t* out = rgb.data();
  switch (ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
      for (size_t i = 0; i < n; ++i) {
        const uint8_t v = static_cast<uint8_t>(std::min<uint16_t>(raw[i], 255));
        out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = v;
      }
      break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
      for (size_t i = 0; i < n; ++i) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = raw[2 * i] >> 8;
      break;
    case SPNG_COLOR_TYPE_TRUECOLOR:
      for (size_t i = 0; i < n * 3; ++i) out[i] = raw[i] >> 8;
      break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
      for (size_t i = 0; i < n; ++i) {
        out[3 * i] = raw[4 * i] >> 8;
        out[3 * i + 1] = raw[4 * i + 1] >> 8;
        out[3 * i + 2] = raw[4 * i + 2] >> 8;
      }
      break;
    default:
      return DataLoss("PNG has 16-bit samples in color type " + std::to_string(ihdr.color_type));
  }
  return Status::Ok();
}

}  // namespace stoker
