// codecs/webp.cc — WebP decode with libwebp (see header).
// Thread-safety: stateless.
#include "codecs/webp.h"

#include <webp/decode.h>

#include <string>

namespace stoker {

Status DecodeWebpRgb(std::span<const uint8_t> webp, std::vector<uint8_t>& rgb, int* width, int* height) {
  WebPBitstreamFeatures f{};
  if (VP8StatusCode s = WebPGetFeatures(webp.data(), webp.size(), &f); s != VP8_STATUS_OK) {
    return DataLoss("WebP header: libwebp status " + std::to_string(static_cast<int>(s)));
  }
  if (f.has_animation) return DataLoss("WebP is animated; only still images are decoded");
  if (f.width <= 0 || f.height <= 0) return DataLoss("WebP has no pixels");
  *width = f.width;
  *height = f.height;
  const size_t n = static_cast<size_t>(f.width) * f.height * 3;
  rgb.resize(n);
  if (WebPDecodeRGBInto(webp.data(), webp.size(), rgb.data(), n, f.width * 3) == nullptr) {
    return DataLoss("WebP decode failed (corrupt or truncated data)");
  }
  return Status::Ok();
}

}  // namespace stoker
