// tests/fuzz/jpeg_fuzz.cc — the JPEG wrapper (header, DCT-scaled region
// decode, resize into a slot, the full-plane fallback) on any bytes, and the
// marker reader GPU decode asks first (codecs/jpeg_header.h).
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/jpeg.h"
#include "codecs/jpeg_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static stoker::JpegDecoder* decoder = new stoker::JpegDecoder();  // reused, as a decode thread does
  std::span<const uint8_t> jpeg(data, size);
  if (stoker::Result<stoker::JpegHeader> header = stoker::ReadJpegHeader(jpeg); header.ok()) {
    (void)header->GpuRefusal();
  }
  stoker::Result<stoker::JpegInfo> info = decoder->ReadInfo(jpeg);
  if (!info.ok()) return 0;
  // Bound the work per input: a header may claim 65535 x 65535.
  if (static_cast<uint64_t>(info->width) * static_cast<uint64_t>(info->height) > (1u << 22)) return 0;
  stoker::ImageSpec spec;
  spec.height = 24;
  spec.width = 32;
  spec.mode = size % 2 ? stoker::ResizeMode::kRandomResizedCrop : stoker::ResizeMode::kShorterCenterCrop;
  spec.random_hflip = true;
  std::vector<uint8_t> out(spec.OutputBytes());
  decoder->SetRegionDecode(size % 3 != 0);
  (void)decoder->DecodeInto(jpeg, spec, size, out);
  return 0;
}
