// codecs/image_decoder.cc — codec dispatch by content (see header).
// Thread-safety: one instance per thread.
#include "codecs/image_decoder.h"

#include <webp/decode.h>

#include "codecs/image_channels.h"
#include "codecs/image_format.h"
#include "codecs/png.h"
#include "codecs/rgb_window.h"
#include "codecs/webp.h"

namespace stoker {

Status ImageDecoder::DecodeInto(std::span<const uint8_t> bytes, const ImageSpec& spec, uint64_t sample_seed,
                                std::span<uint8_t> out) {
  if (spec.channels != 3) return DecodeChannels(bytes, spec, sample_seed, out);
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

namespace {

// `rgb` (h x w HWC) as `channels` channels in `out`; `alpha` only for 4.
void ToChannels(const uint8_t* rgb, const uint8_t* alpha, size_t pixels, int channels, uint8_t* out) {
  if (channels == 1) {
    RgbToLLikePillow(rgb, pixels, out);
  } else {
    for (size_t i = 0; i < pixels; ++i) {
      out[4 * i] = rgb[3 * i];
      out[4 * i + 1] = rgb[3 * i + 1];
      out[4 * i + 2] = rgb[3 * i + 2];
      out[4 * i + 3] = alpha[i];
    }
  }
}

}  // namespace

Status ImageDecoder::DecodeChannels(std::span<const uint8_t> bytes, const ImageSpec& spec, uint64_t sample_seed,
                                    std::span<uint8_t> out) {
  // The 3-channel result as HWC uint8 (same crop, resize and flip from the
  // same seed), then converted and written in the spec's layout and type.
  ImageSpec rgb_spec = spec;
  rgb_spec.channels = 3;
  rgb_spec.chw = false;
  rgb_spec.pixel = PixelType::kUint8;
  rgb_spec.normalize = false;
  rgb_.resize(rgb_spec.OutputBytes());
  STOKER_RETURN_IF_ERROR(DecodeInto(bytes, rgb_spec, sample_seed, rgb_));
  const size_t pixels = static_cast<size_t>(spec.height) * static_cast<size_t>(spec.width);
  if (spec.channels == 4) STOKER_RETURN_IF_ERROR(DecodeAlpha(bytes, spec.width, spec.height, alpha_));
  converted_.resize(pixels * spec.channels);
  ToChannels(rgb_.data(), alpha_.data(), pixels, spec.channels, converted_.data());
  WriteChannels(converted_.data(), spec.height, spec.width, spec, out.data());
  return Status::Ok();
}

Status ImageDecoder::DecodeVariable(std::span<const uint8_t> bytes, const ImageSpec& spec, std::span<uint8_t> out,
                                    int* height, int* width) {
  int w = 0, h = 0;
  STOKER_RETURN_IF_ERROR(ReadSize(bytes, &w, &h));
  if (static_cast<int64_t>(w) * h > spec.max_pixels) {
    return DataLoss("image is " + std::to_string(w) + "x" + std::to_string(h) + ", more than max_pixels " +
                    std::to_string(spec.max_pixels));
  }
  STOKER_RETURN_IF_ERROR(DecodeRgb(bytes, &rgb_, &w, &h));
  const size_t pixels = static_cast<size_t>(w) * static_cast<size_t>(h);
  if (static_cast<int64_t>(pixels) > spec.max_pixels) return DataLoss("image size changed between header and decode");
  const uint8_t* hwc = rgb_.data();
  if (spec.channels != 3) {
    if (spec.channels == 4) STOKER_RETURN_IF_ERROR(DecodeAlpha(bytes, w, h, alpha_));
    converted_.resize(pixels * spec.channels);
    ToChannels(rgb_.data(), alpha_.data(), pixels, spec.channels, converted_.data());
    hwc = converted_.data();
  }
  WriteChannels(hwc, h, w, spec, out.data());
  *height = h;
  *width = w;
  return Status::Ok();
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
