// codecs/jpeg_header.h — what a JPEG's markers say about it, read without
// decoding: size, frame type, precision, components and their sampling, the
// Adobe colour transform, and whether the file ends where a JPEG ends (EOI).
//
// Why: a decoder other than libjpeg-turbo (nvJPEG on the GPU, or its hardware
// engine) takes only some JPEGs. The decode threads ask this on every image
// they send there, so the rest (progressive on the hardware engine, CMYK,
// 12-bit, lossless, arithmetic coding, a truncated file) goes to the CPU
// decoder and gets its typed errors. It walks the markers up to the first
// scan and looks at the last two bytes: microseconds, no allocation.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>

#include "stoker/status.h"

namespace stoker {

struct JpegHeader {
  int width = 0, height = 0;
  int precision = 8;      // bits per sample
  int components = 0;     // 1 gray, 3 YCbCr (or RGB), 4 CMYK/YCCK
  uint8_t sof = 0;        // the frame marker's low byte: 0xC0 baseline, 0xC1 extended, 0xC2 progressive...
  int h[4] = {}, v[4] = {};  // sampling factors per component
  int adobe_transform = -1;  // APP14's transform flag; -1: no Adobe marker
  bool ends_with_eoi = false;

  bool progressive() const { return sof == 0xC2 || sof == 0xC6 || sof == 0xCA || sof == 0xCE; }
  bool arithmetic() const { return sof >= 0xC9; }
  bool lossless() const { return sof == 0xC3 || sof == 0xC7 || sof == 0xCB || sof == 0xCF; }
  // 8-bit Huffman baseline/extended YCbCr or gray with luma-first sampling
  // that a GPU decoder's colour conversion reads as libjpeg does: what
  // nvJPEG's engines decode to the same RGB as the CPU path. Else the reason
  // (a fallback counter's name): "progressive", "cmyk", "rgb", "12bit",
  // "lossless", "arithmetic", "sampling", "truncated".
  const char* GpuRefusal() const;
};

// InvalidArgument naming the offset when the bytes are not a JPEG or its
// markers end before the first scan.
Result<JpegHeader> ReadJpegHeader(std::span<const uint8_t> bytes);

}  // namespace stoker
