// codecs/png_fast.cc — libdeflate PNG path (see header). The unfilter loops
// are the PNG specification's (ISO 15948 §9): each byte is predicted from the
// byte bpp to the left (a), above (b) and above-left (c).
#include "codecs/png_fast.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace stoker {
namespace {

constexpr uint64_t kMaxPixels = uint64_t{1} << 28;  // as png.cc

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Unfilters one scanline: `row` (filtered, n bytes) into `out`, given the
// previous unfiltered row `prev` (null for the first). No two overlap, so the
// None/Sub/Up loops vectorize (this file is built with -O3).
bool Unfilter(uint8_t filter, const uint8_t* __restrict row, const uint8_t* __restrict prev, uint8_t* __restrict out,
              size_t n, size_t bpp) {
  switch (filter) {
    case 0:
      std::memcpy(out, row, n);
      return true;
    case 1:
      for (size_t i = 0; i < bpp && i < n; ++i) out[i] = row[i];
      for (size_t i = bpp; i < n; ++i) out[i] = static_cast<uint8_t>(row[i] + out[i - bpp]);
      return true;
    case 2:
      if (!prev) {
        std::memcpy(out, row, n);
        return true;
      }
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(row[i] + prev[i]);
      return true;
    case 3:
      for (size_t i = 0; i < n; ++i) {
        const unsigned a = i >= bpp ? out[i - bpp] : 0, b = prev ? prev[i] : 0;
        out[i] = static_cast<uint8_t>(row[i] + ((a + b) >> 1));
      }
      return true;
    case 4:
      for (size_t i = 0; i < n; ++i) {
        const int a = i >= bpp ? out[i - bpp] : 0, b = prev ? prev[i] : 0, c = (prev && i >= bpp) ? prev[i - bpp] : 0;
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        const int pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
        out[i] = static_cast<uint8_t>(row[i] + pred);
      }
      return true;
    default:
      return false;
  }
}

struct Scratch {
  std::unique_ptr<libdeflate_decompressor, DecompressorFree> inflater{libdeflate_alloc_decompressor()};
  std::vector<uint8_t> idat;      // the IDAT chunks' data, joined
  std::vector<uint8_t> filtered;  // inflated scanlines: one filter byte + the row, per row
  std::vector<uint8_t> rows;      // two unfiltered rows (gray, RGBA, palette)
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

bool DecodePngRgbFast(std::span<const uint8_t> png, std::vector<uint8_t>& rgb, int* width, int* height) {
  static constexpr uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (png.size() < 8 + 25 || std::memcmp(png.data(), kSig, 8) != 0) return false;
  Scratch& s = ThreadScratch();
  if (!s.inflater) return false;
  s.idat.clear();
  uint32_t w = 0, h = 0;
  int ctype = -1;
  uint8_t palette_rgb[256 * 3] = {};  // entries past PLTE's stay black
  size_t palette_n = 0;
  uint8_t max_index = 0;
  bool ended = false;
  // Walk the chunks: IHDR first; PLTE, IDAT kept; IEND stops; any other
  // critical chunk is unknown here (libspng decides).
  for (size_t off = 8; off + 12 <= png.size();) {
    const uint32_t len = Be32(&png[off]);
    if (len > png.size() - off - 12) return false;
    const uint8_t* type = &png[off + 4];
    const uint8_t* data = &png[off + 8];
    const bool critical = !(type[0] & 0x20);
    if (critical && libdeflate_crc32(0, type, len + 4) != Be32(data + len)) return false;
    if (off == 8) {
      if (std::memcmp(type, "IHDR", 4) != 0 || len != 13) return false;
      w = Be32(data);
      h = Be32(data + 4);
      const uint8_t depth = data[8];
      ctype = data[9];
      if (depth != 8 || data[10] != 0 || data[11] != 0 || data[12] != 0) return false;  // 8-bit, not interlaced
      if (ctype != 0 && ctype != 2 && ctype != 3 && ctype != 6) return false;
      if (w == 0 || h == 0 || uint64_t{w} * h > kMaxPixels) return false;
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      s.idat.insert(s.idat.end(), data, data + len);
    } else if (std::memcmp(type, "PLTE", 4) == 0) {
      if (len % 3 != 0 || len > sizeof(palette_rgb)) return false;
      std::memcpy(palette_rgb, data, len);
      palette_n = len / 3;
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      ended = true;
      break;
    } else if (critical) {
      return false;
    }
    off += 12 + size_t{len};
  }
  if (!ended || s.idat.empty() || (ctype == 3 && palette_n == 0)) return false;

  const size_t bpp = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : 4;
  const size_t row = size_t{w} * bpp, n = size_t{w} * h;
  s.filtered.resize((row + 1) * h);
  size_t got = 0;
  if (libdeflate_zlib_decompress(s.inflater.get(), s.idat.data(), s.idat.size(), s.filtered.data(), s.filtered.size(),
                                 &got) != LIBDEFLATE_SUCCESS ||
      got != s.filtered.size()) {
    return false;
  }
  if (rgb.size() < n * 3) rgb.resize(n * 3);
  rgb.resize(n * 3);
  uint8_t* f = s.filtered.data();
  if (ctype == 2) {  // straight into the output: the previous output row is the prediction
    for (size_t y = 0; y < h; ++y) {
      uint8_t* out = rgb.data() + y * row;
      if (!Unfilter(f[y * (row + 1)], f + y * (row + 1) + 1, y ? out - row : nullptr, out, row, bpp)) return false;
    }
  } else {  // into two alternating row buffers, each row converted as it is done
    s.rows.resize(2 * row);
    for (size_t y = 0; y < h; ++y) {
      uint8_t* cur = s.rows.data() + (y & 1) * row;
      const uint8_t* prev = y ? s.rows.data() + ((y + 1) & 1) * row : nullptr;
      if (!Unfilter(f[y * (row + 1)], f + y * (row + 1) + 1, prev, cur, row, bpp)) return false;
      uint8_t* o = rgb.data() + y * size_t{w} * 3;
      if (ctype == 0) {
        for (size_t i = 0; i < w; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = cur[i];
      } else if (ctype == 6) {
        for (size_t i = 0; i < w; ++i) {
          o[3 * i] = cur[4 * i];
          o[3 * i + 1] = cur[4 * i + 1];
          o[3 * i + 2] = cur[4 * i + 2];
        }
      } else {
        for (size_t i = 0; i < w; ++i) std::memcpy(o + 3 * i, palette_rgb + 3 * cur[i], 3);
        max_index = std::max(max_index, *std::max_element(cur, cur + w));
      }
    }
    // An index past the palette is left to libspng's rules.
    if (ctype == 3 && max_index >= palette_n) return false;
  }
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  return true;
}

}  // namespace stoker
