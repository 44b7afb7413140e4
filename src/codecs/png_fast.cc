// codecs/png_fast.cc — libdeflate PNG path (see header). The unfilter loops
// are the PNG specification's (ISO 15948 §9): each byte is predicted from the
// byte bpp to the left (a), above (b) and above-left (c).
#include "codecs/png_fast.h"

#include <libdeflate.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

#if defined(__SSE2__)
// Paeth on one pixel of 3 or 4 bytes at a time, its channels side by side in
// 16-bit lanes (the method of libpng's filter_sse2_intrinsics.c): a photo's
// rows are nearly all Paeth, and the scalar loop is a serial chain per byte.
inline __m128i Abs16(__m128i x) {
  const __m128i neg = _mm_cmplt_epi16(x, _mm_setzero_si128());
  return _mm_sub_epi16(_mm_xor_si128(x, neg), neg);
}
inline __m128i Select(__m128i mask, __m128i yes, __m128i no) {
  return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}
// One pixel: b (above) and the filtered bytes in, the pixel (16-bit lanes) out.
inline __m128i PaethPixel(__m128i a, __m128i b, __m128i c, __m128i x) {
  __m128i pa = _mm_sub_epi16(b, c);  // p - a = b - c
  __m128i pb = _mm_sub_epi16(a, c);  // p - b = a - c
  __m128i pc = Abs16(_mm_add_epi16(pa, pb));
  pa = Abs16(pa);
  pb = Abs16(pb);
  const __m128i least = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
  // The specification's tie order: a, then b, then c.
  const __m128i pred = Select(_mm_cmpeq_epi16(least, pa), a, Select(_mm_cmpeq_epi16(least, pb), b, c));
  return _mm_and_si128(_mm_add_epi16(x, pred), _mm_set1_epi16(0xff));  // mod 256 per lane
}
inline __m128i Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_unpacklo_epi8(_mm_cvtsi32_si128(v), _mm_setzero_si128());
}
inline uint32_t Pack(__m128i v) { return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_packus_epi16(v, v))); }

// Whole 4-byte loads and stores: for 3-byte pixels the 4th lane is the next
// pixel's first byte, computed and then overwritten by that pixel; the last
// pixel of the row, whose 4th byte lies past the row, goes through a copy.
template <size_t kBpp>
void PaethSse2(const uint8_t* row, const uint8_t* prev, uint8_t* out, size_t n) {
  __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 4 <= n; i += kBpp) {
    const __m128i b = Load4(prev + i);
    a = PaethPixel(a, b, c, Load4(row + i));
    const uint32_t v = Pack(a);
    std::memcpy(out + i, &v, 4);
    c = b;
  }
  if (i < n) {  // the last 3-byte pixel
    uint8_t pb[4] = {}, px[4] = {};
    std::memcpy(pb, prev + i, kBpp);
    std::memcpy(px, row + i, kBpp);
    const uint32_t v = Pack(PaethPixel(a, Load4(pb), c, Load4(px)));
    std::memcpy(out + i, &v, kBpp);
  }
}
#endif

// Unfilters one scanline: `row` (filtered, n bytes) into `out`, given the
// previous unfiltered row `prev` (zeros for the first). No two overlap, so
// the None/Sub/Up loops vectorize (this file is built with -O3).
bool Unfilter(uint8_t filter, const uint8_t* __restrict row, const uint8_t* __restrict prev, uint8_t* __restrict out,
              size_t n, size_t bpp) {
  switch (filter) {
    case 0:
      std::memcpy(out, row, n);
      return true;
    case 1:
      for (size_t i = 0; i < bpp; ++i) out[i] = row[i];
      for (size_t i = bpp; i < n; ++i) out[i] = static_cast<uint8_t>(row[i] + out[i - bpp]);
      return true;
    case 2:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(row[i] + prev[i]);
      return true;
    case 3:
      for (size_t i = 0; i < bpp; ++i) out[i] = static_cast<uint8_t>(row[i] + (prev[i] >> 1));
      for (size_t i = bpp; i < n; ++i) out[i] = static_cast<uint8_t>(row[i] + ((out[i - bpp] + prev[i]) >> 1));
      return true;
    case 4:
#if defined(__SSE2__)
      if (bpp == 3) {
        PaethSse2<3>(row, prev, out, n);
        return true;
      }
      if (bpp == 4) {
        PaethSse2<4>(row, prev, out, n);
        return true;
      }
#endif
      for (size_t i = 0; i < bpp; ++i) out[i] = static_cast<uint8_t>(row[i] + prev[i]);  // a = c = 0: b
      for (size_t i = bpp; i < n; ++i) {
        const int a = out[i - bpp], b = prev[i], c = prev[i - bpp];
        const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
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
  std::vector<uint8_t> zeros;     // the row above the first
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
  bool in_idat = false, after_idat = false;  // inside the run of IDAT chunks; past it
  bool palette_after = false;                // a tRNS, bKGD or hIST came before any PLTE
  // Walk the chunks: IHDR first; PLTE, IDAT kept; IEND stops; any other
  // critical chunk is unknown here (libspng decides). Where the order breaks
  // the specification (ISO 15948 §5.6) in a way libspng refuses or reads
  // otherwise, the PNG is declined and libspng decides: a PLTE after IDAT, a
  // second PLTE, an empty one or one after tRNS/bKGD/hIST (libspng refuses
  // these); IDATs split by another chunk (libspng reads the first run only).
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
      if (after_idat) return false;
      in_idat = true;
      s.idat.insert(s.idat.end(), data, data + len);
      off += 12 + size_t{len};
      continue;
    } else if (std::memcmp(type, "PLTE", 4) == 0) {
      if (in_idat || after_idat || palette_n != 0 || palette_after) return false;
      if (len == 0 || len % 3 != 0 || len > sizeof(palette_rgb)) return false;
      std::memcpy(palette_rgb, data, len);
      palette_n = len / 3;
    } else if (std::memcmp(type, "tRNS", 4) == 0 || std::memcmp(type, "bKGD", 4) == 0 ||
               std::memcmp(type, "hIST", 4) == 0) {
      palette_after = palette_after || palette_n == 0;
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      ended = true;
      break;
    } else if (critical) {
      return false;
    }
    after_idat = after_idat || in_idat;
    in_idat = false;
    off += 12 + size_t{len};
  }
  if (!ended || s.idat.empty() || (ctype == 3 && palette_n == 0)) return false;

  const size_t bpp = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : 4;
  const size_t row = size_t{w} * bpp, n = size_t{w} * h;
  // Deflate writes at most 258 bytes per 2 bits (a longest match, 1-bit
  // codes): IDAT data too short for the scanlines is declined before they are
  // allocated, or a 60-byte file claiming 2^28 pixels would have this
  // thread's scratch zero-fill and keep 1 GiB.
  if ((row + 1) * h / 1032 > s.idat.size()) return false;
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
  s.zeros.assign(row, 0);
  if (ctype == 2) {  // straight into the output: the previous output row is the prediction
    for (size_t y = 0; y < h; ++y) {
      uint8_t* out = rgb.data() + y * row;
      if (!Unfilter(f[y * (row + 1)], f + y * (row + 1) + 1, y ? out - row : s.zeros.data(), out, row, bpp)) return false;
    }
  } else {  // into two alternating row buffers, each row converted as it is done
    s.rows.resize(2 * row);
    for (size_t y = 0; y < h; ++y) {
      uint8_t* cur = s.rows.data() + (y & 1) * row;
      const uint8_t* prev = y ? s.rows.data() + ((y + 1) & 1) * row : s.zeros.data();
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
