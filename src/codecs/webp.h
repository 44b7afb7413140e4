// codecs/webp.h — WebP (lossy, lossless, with or without alpha) to full-size
// interleaved RGB through libwebp's WebPDecodeRGBInto: alpha is dropped, as
// Pillow's convert("RGB") does (Pillow decodes to RGBA with the same libwebp
// YUV->RGB conversion, fancy upsampling on). Lossless output equals Pillow's
// exactly; lossy output equals it when both use the same libwebp version
// (see tests/python/test_formats.py for the measured gap otherwise).
// Animated WebP is refused (not a still image).
// Thread-safety: stateless; `rgb` belongs to the caller.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoker/status.h"

namespace stoker {

Status DecodeWebpRgb(std::span<const uint8_t> webp, std::vector<uint8_t>& rgb, int* width, int* height);

}  // namespace stoker
