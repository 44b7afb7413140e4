// codecs/jpeg_header.cc — see jpeg_header.h.
#include "codecs/jpeg_header.h"

#include <string>

namespace stoker {

namespace {

int Be16(const uint8_t* p) { return (p[0] << 8) | p[1]; }

}  // namespace

const char* JpegHeader::GpuRefusal() const {
  if (!ends_with_eoi) return "truncated";
  if (progressive()) return "progressive";
  if (arithmetic()) return "arithmetic";
  if (lossless()) return "lossless";
  if (precision != 8) return "12bit";
  if (components == 4) return "cmyk";
  if (components != 1 && components != 3) return "components";
  if (components == 3 && adobe_transform == 0) return "rgb";  // stored RGB: no YCbCr conversion
  if (components == 3) {
    // Chroma at 1x1, luma at 1 or 2 per axis: 4:4:4, 4:2:2, 4:2:0, 4:4:0.
    if (h[1] != 1 || v[1] != 1 || h[2] != 1 || v[2] != 1) return "sampling";
    if (h[0] < 1 || h[0] > 2 || v[0] < 1 || v[0] > 2) return "sampling";
  }
  return nullptr;
}

Result<JpegHeader> ReadJpegHeader(std::span<const uint8_t> b) {
  const size_t n = b.size();
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return InvalidArgument("not a JPEG file (no SOI marker at offset 0)");
  JpegHeader h;
  h.ends_with_eoi = b[n - 2] == 0xFF && b[n - 1] == 0xD9;
  size_t at = 2;
  while (true) {
    while (at < n && b[at] == 0xFF && at + 1 < n && b[at + 1] == 0xFF) ++at;  // fill bytes
    if (at + 4 > n) return InvalidArgument("JPEG markers end at offset " + std::to_string(at) + " before the first scan");
    if (b[at] != 0xFF) return InvalidArgument("JPEG: expected a marker at offset " + std::to_string(at));
    const uint8_t m = b[at + 1];
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {  // standalone markers
      at += 2;
      continue;
    }
    const size_t len = static_cast<size_t>(Be16(&b[at + 2]));
    if (len < 2 || at + 2 + len > n) {
      return InvalidArgument("JPEG: the marker segment at offset " + std::to_string(at) + " runs past the end of the file");
    }
    const uint8_t* seg = &b[at + 4];
    const size_t seg_len = len - 2;
    if (m == 0xDA) {  // start of scan: the header is over
      if (h.components == 0) return InvalidArgument("JPEG: scan at offset " + std::to_string(at) + " before any frame");
      return h;
    }
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (seg_len < 6) return InvalidArgument("JPEG: short frame header at offset " + std::to_string(at));
      h.sof = m;
      h.precision = seg[0];
      h.height = Be16(seg + 1);
      h.width = Be16(seg + 3);
      h.components = seg[5];
      if (seg_len < 6 + 3 * static_cast<size_t>(h.components)) {
        return InvalidArgument("JPEG: short frame header at offset " + std::to_string(at));
      }
      for (int c = 0; c < h.components && c < 4; ++c) {
        h.h[c] = seg[6 + 3 * c + 1] >> 4;
        h.v[c] = seg[6 + 3 * c + 1] & 15;
      }
    } else if (m == 0xEE && seg_len >= 12 && seg[0] == 'A' && seg[1] == 'd' && seg[2] == 'o' && seg[3] == 'b' &&
               seg[4] == 'e') {
      h.adobe_transform = seg[11];
    }
    at += 2 + len;
  }
}

}  // namespace stoker
