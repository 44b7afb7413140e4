// codecs/image_decoder.cc — codec dispatch by content (see header).
// Thread-safety: one instance per thread.
#include "codecs/image_decoder.h"

#include <webp/decode.h>

#include "codecs/image_format.h"
#include "codecs/png.h"
#include "codecs/rgb_window.h"
#include "codecs/webp.h"

namespace stoker {

Status ImageDecoder::DecodeInto(std::span<const uint8_t> bytes, const ImageSpec& spec, uint64_t sample_seed,
                                std::span<uint8_t> out) {
  int w = 0, h = 0;
  last_width_ = last_height_ = 0;
  last_jpeg_ = false;
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng:
      STOKER_RETURN_IF_ERROR(DecodePngRgb(bytes, scratch_.full_rgb, &w, &h));
      break;
    case ImageFormat::kWebp:
      STOKER_RETURN_IF_ERROR(DecodeWebpRgb(bytes, scratch_.full_rgb, &w, &h));
      break;
    default:
      last_jpeg_ = true;
      return jpeg_.DecodeInto(bytes, spec, sample_seed, out);
  }
  last_width_ = w;
  last_height_ = h;
  return FullRgbToOutput(scratch_.full_rgb.data(), w, h, spec, sample_seed, scratch_, out);
}

void ImageDecoder::LastSize(int* width, int* height) const {
  if (last_jpeg_) return jpeg_.LastSize(width, height);
  *width = last_width_;
  *height = last_height_;
}

Status ImageDecoder::DecodeRgb(std::span<const uint8_t> bytes, std::vector<uint8_t>* rgb, int* width,
                               int* height) {
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng: return DecodePngRgb(bytes, *rgb, width, height);
    case ImageFormat::kWebp: return DecodeWebpRgb(bytes, *rgb, width, height);
    default: return jpeg_.DecodeRgb(bytes, rgb, width, height);
  }
}

Status ImageDecoder::ReadSize(std::span<const uint8_t> bytes, int* width, int* height) {
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng:
      // IHDR sits at a fixed place: 8-byte signature, length, "IHDR", w, h.
      if (bytes.size() < 24) return DataLoss("PNG is truncated before its header");
      *width = static_cast<int>((uint32_t{bytes[16]} << 24) | (uint32_t{bytes[17]} << 16) | (uint32_t{bytes[18]} << 8) | bytes[19]);
      *height = static_cast<int>((uint32_t{bytes[20]} << 24) | (uint32_t{bytes[21]} << 16) | (uint32_t{bytes[22]} << 8) | bytes[23]);
      return Status::Ok();
    case ImageFormat::kWebp:
      if (!WebPGetInfo(bytes.data(), bytes.size(), width, height)) return DataLoss("WebP header is invalid");
      return Status::Ok();
    default: {
      STOKER_ASSIGN_OR_RETURN(JpegInfo info, jpeg_.ReadInfo(bytes));
      *width = info.width;
      *height = info.height;
      return Status::Ok();
    }
  }
}

}  // namespace stoker
