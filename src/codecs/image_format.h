// codecs/image_format.h — which codec an image member needs, from its first
// bytes (magic numbers), never from its name: a ".jpg" that holds a PNG
// decodes as the PNG it is.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>

namespace stoker {

enum class ImageFormat : uint8_t { kUnknown, kJpeg, kPng, kWebp };

ImageFormat SniffImageFormat(std::span<const uint8_t> bytes);
const char* ImageFormatName(ImageFormat format);  // "JPEG", "PNG", "WebP", "unknown"

}  // namespace stoker
