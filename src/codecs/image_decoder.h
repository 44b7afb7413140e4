// codecs/image_decoder.h — an image member's bytes to its output slot,
// whatever the codec: sniffs the content (image_format.h) and runs JPEG
// (jpeg.h: region/DCT-scaled paths), PNG (png.h) or WebP (webp.h). PNG and
// WebP decode to full-size RGB and share JPEG's full-RGB path
// (rgb_window.h): same geometry, resize and output write.
// Bytes that are none of the three go to the JPEG decoder, whose error
// (e.g. "not a JPEG file") says what was wrong.
// Thread-safety: one instance per thread (it owns a JpegDecoder and scratch
// buffers that grow to the largest image and stay).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "codecs/decode_scratch.h"
#include "codecs/jpeg.h"
#include "stoker/image_spec.h"
#include "stoker/status.h"

namespace stoker {

class ImageDecoder {
 public:
  // Decodes `bytes`, applies spec, writes spec.OutputBytes() bytes to out.
  Status DecodeInto(std::span<const uint8_t> bytes, const ImageSpec& spec, uint64_t sample_seed,
                    std::span<uint8_t> out);
  // The source size of the last DecodeInto's image; 0 x 0 where it is not
  // known (JpegDecoder::LastSize).
  void LastSize(int* width, int* height) const;
  // A variable-size image (spec.variable): as stored, spec.channels
  // channels, into the start of `out` (spec.OutputBytes()); its height and
  // width to *height, *width. DataLoss past spec.max_pixels.
  Status DecodeVariable(std::span<const uint8_t> bytes, const ImageSpec& spec, std::span<uint8_t> out, int* height,
                        int* width);
  // Full-size RGB (HWC uint8), no transform.
  Status DecodeRgb(std::span<const uint8_t> bytes, std::vector<uint8_t>* rgb, int* width, int* height);
  // Width and height from the header (PNG/WebP decode it whole: rarely hot).
  Status ReadSize(std::span<const uint8_t> bytes, int* width, int* height);

  JpegDecoder& jpeg() { return jpeg_; }

 private:
  // channels 1 or 4 (codecs/image_channels.h): the RGB result, then converted.
  Status DecodeChannels(std::span<const uint8_t> bytes, const ImageSpec& spec, uint64_t sample_seed,
                        std::span<uint8_t> out);

  JpegDecoder jpeg_;
  DecodeScratch scratch_;
  int last_width_ = 0, last_height_ = 0;  // PNG/WebP; JPEG's are jpeg_'s
  bool last_jpeg_ = false;
  std::vector<uint8_t> rgb_, converted_, alpha_;  // DecodeChannels' and DecodeVariable's
};

}  // namespace stoker
