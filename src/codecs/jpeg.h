// codecs/jpeg.h — JPEG decode (and encode, for `stoker synth`) through
// libjpeg-turbo (its libjpeg API for region decode and for sampling layouts
// TurboJPEG cannot name, TurboJPEG otherwise), with resize, crop, flip and
// normalize.
//
// Decode paths, by spec.resample:
// - bilinear (default) / bicubic: torchvision's geometry and Pillow's
//   antialiased filter (resample.h). The RGB is what Pillow decodes (ISLOW,
//   fancy upsampling); only the source rectangle the filter reaches is
//   decoded: at DCT scale 1/1 for YCbCr/gray as raw planes of its iMCUs, with
//   libjpeg's upsampling and color conversion redone row by row and each row
//   resampled at once (jpeg_raw_resample.h); otherwise by libjpeg to RGB
//   (jpeg_rgb_region.h; CMYK decodes whole). DCT scaling only when the crop
//   stays >= 4x the output after it (ChooseResampleDenom).
// - box: the older fast path. Pick the largest DCT scale among 1/8, 1/4, 1/2
//   that still leaves the region at least as large as the output; run the
//   IDCT only on the iMCU rows and columns that hold the crop (YCbCr/gray
//   JPEGs; others decode whole); libyuv box resize of the YCbCr planes.
// Either way the result goes straight into `out` (the sample's slot of a
// batch buffer). Grayscale and CMYK JPEGs come out as RGB.
// Quality contract: at full size the RGB equals Pillow's decode of the same
// file exactly; resized, it matches torchvision's transforms on Pillow within
// the bounds in README.md (tests/python/test_torchvision_fidelity.py).
// Thread-safety: a JpegDecoder is owned by one thread (it keeps a TurboJPEG
// handle, a libjpeg decompressor and scratch buffers that grow to the largest
// image and stay; libjpeg still mallocs and frees its per-image tables inside
// each decode, as TurboJPEG does).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "stoker/image_spec.h"
#include "stoker/status.h"

namespace stoker {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 3;  // 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  Result<JpegInfo> ReadInfo(std::span<const uint8_t> jpeg);

  // Decodes jpeg, applies spec, writes spec.OutputBytes() bytes to out.
  // `sample_seed` drives the random crop and flip: the same seed gives the same
  // pixels on any thread. Errors say what libjpeg-turbo reported.
  Status DecodeInto(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                    std::span<uint8_t> out);

  // The size of the last DecodeInto's image, where the path it took read the
  // header through ReadHeader (TurboJPEG's paths); 0 x 0 otherwise (the box
  // filter's libjpeg region path, or a header that failed).
  void LastSize(int* width, int* height) const;

  // false: every DecodeInto takes the TurboJPEG full-plane path (decode the
  // whole image, then crop). Same pixels, slower: for tests and benchmarks.
  void SetRegionDecode(bool enabled);

  // Full-size RGB (HWC uint8), no transform: the reference path for tests.
  Status DecodeRgb(std::span<const uint8_t> jpeg, std::vector<uint8_t>* rgb, int* width, int* height);

  // The same pixels as DecodeRgb, written into the caller's buffer, which
  // must hold exactly width * height * 3 bytes (ReadInfo gives the size):
  // no allocation per image, so a decode-only benchmark measures the decode.
  // *width and *height are set once the header is read, also when `out` has
  // the wrong size (then InvalidArgument, and nothing is written).
  Status DecodeRgbInto(std::span<const uint8_t> jpeg, std::span<uint8_t> out, int* width, int* height);

 private:
  Status DecodeIntoOnce(std::span<const uint8_t> jpeg, const ImageSpec& spec, uint64_t sample_seed,
                        std::span<uint8_t> out);
  Status DecodeRgbOnce(std::span<const uint8_t> jpeg, std::vector<uint8_t>* rgb, int* width, int* height);
  Status DecodeRgbIntoOnce(std::span<const uint8_t> jpeg, std::span<uint8_t> out, int* width, int* height);
  Status RenewOnError(Status status);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Encodes HWC RGB uint8 (or 1-channel gray) as a baseline JPEG.
// subsampling: 444, 422 or 420.
Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* pixels, int width, int height, int channels,
                                        int quality, int subsampling = 420);

}  // namespace stoker
