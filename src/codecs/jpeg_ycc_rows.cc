// codecs/jpeg_ycc_rows.cc — libjpeg-exact RGB rows from raw planes (see header).
// Each row: per chroma plane, the column sums of its two nearest chroma rows
// (int16, one extra sum each side, edge-replicated), then the horizontal
// triangle filter into one upsampled byte per luma column; then jdcolor.c's
// conversion of Y and the two upsampled rows. The AVX2 conversion is
// libjpeg-turbo's own jdcolext-avx2.asm arithmetic (R = y + cr + 0.402 cr via
// pmulhw with rounding, B = y + 2 cb - 0.228 cb, G through pmaddwd of
// (cb, cr) pairs), which that project keeps bit-exact with the tables of the
// C code used here for the scalar loops and tails.
// Thread-safety: see header.
#include "codecs/jpeg_ycc_rows.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define STOKER_YCC_X86 1
#else
#define STOKER_YCC_X86 0
#endif

namespace stoker {
namespace {

// jdcolor.c's build_ycc_rgb_table (SCALEBITS 16), with the clamp of its
// range_limit table.
struct YccTables {
  int cr_r[256], cb_b[256];
  int32_t cr_g[256], cb_g[256];
  YccTables() {
    constexpr int32_t kHalf = 1 << 15;
    for (int i = 0; i < 256; ++i) {
      const int32_t x = i - 128;
      cr_r[i] = (91881 * x + kHalf) >> 16;   // FIX(1.40200)
      cb_b[i] = (116130 * x + kHalf) >> 16;  // FIX(1.77200)
      cr_g[i] = -46802 * x;                  // -FIX(0.71414)
      cb_g[i] = -22554 * x + kHalf;          // -FIX(0.34414), rounding folded in
    }
  }
};
const YccTables& Tables() {
  static const YccTables t;
  return t;
}

inline uint8_t Limit(int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

void YccToRgbScalar(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb) {
  const YccTables& t = Tables();
  for (int i = 0; i < n; ++i) {
    const int yy = y[i], b = cb[i], r = cr[i];
    rgb[3 * i] = Limit(yy + t.cr_r[r]);
    rgb[3 * i + 1] = Limit(yy + static_cast<int>((t.cb_g[b] + t.cr_g[r]) >> 16));
    rgb[3 * i + 2] = Limit(yy + t.cb_b[b]);
  }
}

void YccToPlanesScalar(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* r, uint8_t* g,
                       uint8_t* b) {
  const YccTables& t = Tables();
  for (int i = 0; i < n; ++i) {
    const int yy = y[i], u = cb[i], v = cr[i];
    r[i] = Limit(yy + t.cr_r[v]);
    g[i] = Limit(yy + static_cast<int>((t.cb_g[u] + t.cr_g[v]) >> 16));
    b[i] = Limit(yy + t.cb_b[u]);
  }
}

void GrayToRgb(const uint8_t* y, int n, uint8_t* rgb) {
  for (int i = 0; i < n; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = y[i];
}

// Column sums of chroma columns [lo, hi]: 3 near + far, or near alone when
// far is null. `row` points at column 0 of the plane's row.
void ColsumScalar(const uint8_t* near, const uint8_t* far, int lo, int hi, int16_t* out) {
  for (int j = lo; j <= hi; ++j) out[j - lo] = static_cast<int16_t>(far ? 3 * near[j] + far[j] : near[j]);
}

// h2: luma columns 2k, 2k+1 (k in [0, m)) from sums cs[k-1..k+1].
void H2Scalar(const int16_t* cs, int m, int be, int bo, int sh, uint8_t* up) {
  for (int k = 0; k < m; ++k) {
    const int c3 = 3 * cs[k];
    up[2 * k] = static_cast<uint8_t>((c3 + cs[k - 1] + be) >> sh);
    up[2 * k + 1] = static_cast<uint8_t>((c3 + cs[k + 1] + bo) >> sh);
  }
}

#if STOKER_YCC_X86
__attribute__((target("avx2"))) void ColsumAvx2(const uint8_t* near, const uint8_t* far, int lo, int hi,
                                                 int16_t* out) {
  if (hi + 1 - lo < 16) return ColsumScalar(near, far, lo, hi, out);
  // The last step overlaps the one before (same sums): no scalar tail.
  for (int j = lo;; j += 16) {
    if (j + 16 > hi + 1) j = hi + 1 - 16;
    __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(near + j)));
    if (far) {
      const __m256i f = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(far + j)));
      v = _mm256_add_epi16(_mm256_add_epi16(v, _mm256_add_epi16(v, v)), f);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (j - lo)), v);
    if (j + 16 == hi + 1) break;
  }
}

// 16 chroma sums -> 32 upsampled bytes per step: even | odd << 8 per word is
// the bytes in luma order.
__attribute__((target("avx2"))) void H2Avx2(const int16_t* cs, int m, int be, int bo, int sh, uint8_t* up) {
  const __m256i vbe = _mm256_set1_epi16(static_cast<int16_t>(be)), vbo = _mm256_set1_epi16(static_cast<int16_t>(bo));
  const __m128i count = _mm_cvtsi32_si128(sh);
  if (m < 16) return H2Scalar(cs, m, be, bo, sh, up);
  for (int k = 0;; k += 16) {
    if (k + 16 > m) k = m - 16;  // overlaps the step before: same bytes
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cs + k));
    const __m256i prev = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cs + k - 1));
    const __m256i next = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cs + k + 1));
    const __m256i c3 = _mm256_add_epi16(c, _mm256_add_epi16(c, c));
    const __m256i e = _mm256_srl_epi16(_mm256_add_epi16(_mm256_add_epi16(c3, prev), vbe), count);
    const __m256i o = _mm256_srl_epi16(_mm256_add_epi16(_mm256_add_epi16(c3, next), vbo), count);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(up + 2 * k), _mm256_or_si256(e, _mm256_slli_epi16(o, 8)));
    if (k + 16 == m) break;
  }
}

// 16 pixels' Y, Cb, Cr (16-bit, 0..255) -> R, G, B (16-bit, unclamped).
__attribute__((target("avx2"))) inline void Ycc16(__m256i y, __m256i cb, __m256i cr, __m256i* r, __m256i* g,
                                                   __m256i* b) {
  const __m256i c128 = _mm256_set1_epi16(128), one = _mm256_set1_epi16(1);
  cb = _mm256_sub_epi16(cb, c128);
  cr = _mm256_sub_epi16(cr, c128);
  const __m256i cb2 = _mm256_add_epi16(cb, cb), cr2 = _mm256_add_epi16(cr, cr);
  // (2 x * F + 65536) >> 17 == (x * F + 32768) >> 16, as jdcolext-avx2.asm.
  const __m256i rr = _mm256_add_epi16(
      _mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(cr2, _mm256_set1_epi16(26345)), one), 1), cr);
  const __m256i bb = _mm256_add_epi16(
      _mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(cb2, _mm256_set1_epi16(-14942)), one), 1), cb2);
  const __m256i kg = _mm256_set1_epi32(static_cast<int32_t>((18734u << 16) | static_cast<uint16_t>(-22554)));
  const __m256i half = _mm256_set1_epi32(1 << 15);
  const __m256i glo = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi16(cb, cr), kg), half), 16);
  const __m256i ghi = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_unpackhi_epi16(cb, cr), kg), half), 16);
  const __m256i gg = _mm256_sub_epi16(_mm256_packs_epi32(glo, ghi), cr);
  *r = _mm256_add_epi16(y, rr);
  *g = _mm256_add_epi16(y, gg);
  *b = _mm256_add_epi16(y, bb);
}

struct InterleaveMasks {
  __m256i m[3][3];  // [output block][channel]
};
__attribute__((target("avx2"))) InterleaveMasks MakeMasks() {
  InterleaveMasks im;
  for (int blk = 0; blk < 3; ++blk) {
    for (int ch = 0; ch < 3; ++ch) {
      alignas(32) int8_t b[32];
      for (int t = 0; t < 16; ++t) {
        const int k = 16 * blk + t;
        b[t] = b[16 + t] = static_cast<int8_t>(k % 3 == ch ? k / 3 : -128);
      }
      im.m[blk][ch] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    }
  }
  return im;
}

// R, G, B of 32 pixels (bytes in pixel order) -> 96 bytes of HWC RGB.
__attribute__((target("avx2"))) inline void StoreRgb32(__m256i r, __m256i g, __m256i b, const InterleaveMasks& im,
                                                        uint8_t* dst) {
  __m256i blk[3];
  for (int k = 0; k < 3; ++k) {
    blk[k] = _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(r, im.m[k][0]), _mm256_shuffle_epi8(g, im.m[k][1])),
                             _mm256_shuffle_epi8(b, im.m[k][2]));
  }
  // Lane 0 holds pixels 0..15 (bytes 0..47 of the output), lane 1 16..31.
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permute2x128_si256(blk[0], blk[1], 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32), _mm256_permute2x128_si256(blk[2], blk[0], 0x30));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64), _mm256_permute2x128_si256(blk[1], blk[2], 0x31));
}

// planes null: HWC into rgb; else R, G, B rows into planes[0..2].
__attribute__((target("avx2"))) void YccToRgbAvx2(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n,
                                                   uint8_t* rgb, uint8_t* const* planes = nullptr) {
  static const InterleaveMasks im = MakeMasks();
  if (n < 32) {
    if (planes) return YccToPlanesScalar(y, cb, cr, n, planes[0], planes[1], planes[2]);
    return YccToRgbScalar(y, cb, cr, n, rgb);
  }
  for (int i = 0;; i += 32) {
    if (i + 32 > n) i = n - 32;  // overlaps the step before: same bytes
    __m256i r[2], g[2], b[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i yy = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i + 16 * h)));
      const __m256i bb = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cb + i + 16 * h)));
      const __m256i rr = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cr + i + 16 * h)));
      Ycc16(yy, bb, rr, &r[h], &g[h], &b[h]);
    }
    // packus clamps (range_limit); per lane it gives (0..7, 16..23 | 8..15, 24..31).
    const __m256i R = _mm256_permute4x64_epi64(_mm256_packus_epi16(r[0], r[1]), 0xD8);
    const __m256i G = _mm256_permute4x64_epi64(_mm256_packus_epi16(g[0], g[1]), 0xD8);
    const __m256i B = _mm256_permute4x64_epi64(_mm256_packus_epi16(b[0], b[1]), 0xD8);
    if (planes) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes[0] + i), R);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes[1] + i), G);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes[2] + i), B);
    } else {
      StoreRgb32(R, G, B, im, rgb + 3 * i);
    }
    if (i + 32 == n) break;
  }
}

// Even and odd pixels' values (words) clamped to 0..255 (range_limit) and
// put back as bytes in pixel order: packus clamps and leaves (even 0-7, odd
// 0-7 | even 8-15, odd 8-15), interleaved within each lane by one pshufb.
__attribute__((target("avx2"))) inline __m256i JoinEvenOdd(__m256i e, __m256i o) {
  const __m256i zip = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,  //
                                       0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm256_shuffle_epi8(_mm256_packus_epi16(e, o), zip);
}

// Planar output, 32 pixels per step without byte shuffles: the even and
// odd pixels of each 32-byte load as words (mask, shift), converted, clamped
// by max/min, and put back together as even | odd << 8.
__attribute__((target("avx2"))) void YccToPlanesAvx2(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n,
                                                      uint8_t* r, uint8_t* g, uint8_t* b) {
  if (n < 32) return YccToPlanesScalar(y, cb, cr, n, r, g, b);
  const __m256i lo = _mm256_set1_epi16(0x00FF);
  for (int i = 0;; i += 32) {
    if (i + 32 > n) i = n - 32;  // overlaps the step before: same bytes
    const __m256i Y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i));
    const __m256i B = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + i));
    const __m256i R = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cr + i));
    __m256i re, ge, be, ro, go, bo;
    Ycc16(_mm256_and_si256(Y, lo), _mm256_and_si256(B, lo), _mm256_and_si256(R, lo), &re, &ge, &be);
    Ycc16(_mm256_srli_epi16(Y, 8), _mm256_srli_epi16(B, 8), _mm256_srli_epi16(R, 8), &ro, &go, &bo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + i), JoinEvenOdd(re, ro));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + i), JoinEvenOdd(ge, go));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), JoinEvenOdd(be, bo));
    if (i + 32 == n) break;
  }
}

__attribute__((target("avx2"))) void GrayToRgbAvx2(const uint8_t* y, int n, uint8_t* rgb) {
  static const InterleaveMasks im = MakeMasks();
  if (n < 32) return GrayToRgb(y, n, rgb);
  for (int i = 0;; i += 32) {
    if (i + 32 > n) i = n - 32;  // overlaps the step before: same bytes
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i));
    StoreRgb32(v, v, v, im, rgb + 3 * i);
    if (i + 32 == n) break;
  }
}

const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#else
constexpr bool kHaveAvx2 = false;
#endif

}  // namespace

bool YccRowsSupported(const RawLayout& l) {
  if (l.dct != 8) return false;  // DCT-scaled: libjpeg does no fancy upsampling
  switch (l.subsamp) {
    case TJSAMP_GRAY:
    case TJSAMP_444:
    case TJSAMP_440:
      return true;
    case TJSAMP_422:
    case TJSAMP_420:
      return l.plane_w[1] > 2;  // else libjpeg replicates (no fancy filter)
    default:
      return false;
  }
}

void YccRowsImcus(const RawLayout& l, int x0, int x1, int y0, int y1, int* col0, int* col1, int* row0, int* row1) {
  // Luma pixels needed, widened to the luma span of the chroma neighbours.
  int lx0 = x0, lx1 = x1, ly0 = y0, ly1 = y1;
  if (l.ncomp == 3) {
    const int hs = l.hs[0], vs = l.vs[0];  // chroma is 1x1: luma's factors are the ratios
    const int cx0 = std::max(0, x0 / hs - (hs > 1)), cx1 = std::min(l.plane_w[1] - 1, (x1 - 1) / hs + (hs > 1));
    const int cy0 = std::max(0, y0 / vs - (vs > 1)), cy1 = std::min(l.plane_h[1] - 1, (y1 - 1) / vs + (vs > 1));
    lx0 = std::min(lx0, cx0 * hs);
    lx1 = std::max(lx1, (cx1 + 1) * hs);
    ly0 = std::min(ly0, cy0 * vs);
    ly1 = std::max(ly1, (cy1 + 1) * vs);
  }
  const int uh = (l.ncomp == 3 ? l.vs[0] : 1) * l.dct;
  *col0 = lx0 / l.align;
  *col1 = std::min((lx1 - 1) / l.align, (l.width - 1) / l.align);
  *row0 = ly0 / uh;
  *row1 = std::min((ly1 - 1) / uh, l.total_rows - 1);
}

void YccRows::Init(const RawLayout& l, const RawPlanes& p, int x0, int x1, bool simd) {
  l_ = l;
  p_ = p;
  x0_ = x0;
  x1_ = x1;
  simd_ = simd && kHaveAvx2;
  if (l.ncomp == 1) return;
  const int n = x1 - x0;
  if (l.hs[0] == 2) {
    ja_ = x0 >> 1;
    jb_ = (x1 - 1) >> 1;
    const size_t m = static_cast<size_t>(jb_ - ja_ + 1);
    if (colsum_.size() < m + 2 + 32) colsum_.resize(m + 2 + 32);
    for (auto& u : up_) {
      if (u.size() < 2 * m + 64) u.resize(2 * m + 64);
    }
  } else {
    for (auto& u : up_) {
      if (u.size() < static_cast<size_t>(n) + 64) u.resize(static_cast<size_t>(n) + 64);
    }
  }
}

const uint8_t* YccRows::Luma(int y) const {
  return p_.plane[0] + static_cast<size_t>(y - p_.y0[0]) * p_.stride[0] + (x0_ - p_.x0[0]);
}

void YccRows::Row(int y, uint8_t* dst) {
  const int n = x1_ - x0_;
  const uint8_t* yrow = Luma(y);
  if (l_.ncomp == 1) {
#if STOKER_YCC_X86
    if (simd_) return GrayToRgbAvx2(yrow, n, dst);
#endif
    return GrayToRgb(yrow, n, dst);
  }
  const uint8_t* ch[2];
  Chroma(y, ch);
  YccToRgbRow(yrow, ch[0], ch[1], n, dst, simd_);
}

const uint8_t* YccRows::RowPlanes(int y, uint8_t* dst, size_t plane_stride) {
  const int n = x1_ - x0_;
  const uint8_t* yrow = Luma(y);
  if (l_.ncomp == 1) return yrow;  // R = G = B = Y: the plane itself
  const uint8_t* ch[2];
  Chroma(y, ch);
  YccToRgbPlanes(yrow, ch[0], ch[1], n, dst, dst + plane_stride, dst + 2 * plane_stride, simd_);
  return dst;
}

void YccRows::Chroma(int y, const uint8_t* ch[2]) {
  const int n = x1_ - x0_;
  const int hs = l_.hs[0], vs = l_.vs[0];
  for (int c = 1; c <= 2; ++c) {
    // Column 0 of plane c's row r.
    auto row = [&](int r) { return p_.plane[c] + static_cast<size_t>(r - p_.y0[c]) * p_.stride[c] - p_.x0[c]; };
    const int ph = l_.plane_h[c], pw = l_.plane_w[c];
    const int cy = y / vs;
    const uint8_t* near = row(cy);
    const uint8_t* far = nullptr;
    if (vs == 2) far = row((y & 1) ? std::min(cy + 1, ph - 1) : std::max(cy - 1, 0));
    uint8_t* up = up_[c - 1].data();
    if (hs == 1) {
      if (vs == 1) {
        ch[c - 1] = near + x0_;  // 4:4:4: the plane itself
        continue;
      }
      const int bias = (y & 1) ? 2 : 1;  // h1v2: 1 for the row above, 2 below
      for (int i = 0; i < n; ++i) {
        const int x = x0_ + i;
        up[i] = static_cast<uint8_t>((3 * near[x] + far[x] + bias) >> 2);
      }
      ch[c - 1] = up;
      continue;
    }
    // h2: sums of chroma columns [ja - 1, jb + 1], replicated past the edges.
    int16_t* cs = colsum_.data() + 1;  // cs[k] is column ja + k
    const int lo = std::max(ja_ - 1, 0), hi = std::min(jb_ + 1, pw - 1);
    int16_t* at = cs + (lo - ja_);
#if STOKER_YCC_X86
    if (simd_) {
      ColsumAvx2(near, far, lo, hi, at);
    } else {
      ColsumScalar(near, far, lo, hi, at);
    }
#else
    ColsumScalar(near, far, lo, hi, at);
#endif
    if (ja_ == 0) cs[-1] = cs[0];
    if (jb_ + 1 > pw - 1) cs[jb_ - ja_ + 1] = cs[jb_ - ja_];
    const int m = jb_ - ja_ + 1;
    const int be = vs == 2 ? 8 : 1, bo = vs == 2 ? 7 : 2, sh = vs == 2 ? 4 : 2;
#if STOKER_YCC_X86
    if (simd_) {
      H2Avx2(cs, m, be, bo, sh, up);
    } else {
      H2Scalar(cs, m, be, bo, sh, up);
    }
#else
    H2Scalar(cs, m, be, bo, sh, up);
#endif
    ch[c - 1] = up + (x0_ - 2 * ja_);
  }
}

void YccToRgbRow(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* rgb, bool simd) {
#if STOKER_YCC_X86
  if (simd && kHaveAvx2) return YccToRgbAvx2(y, cb, cr, n, rgb);
#endif
  (void)simd;
  YccToRgbScalar(y, cb, cr, n, rgb);
}

void YccToRgbPlanes(const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int n, uint8_t* r, uint8_t* g, uint8_t* b,
                    bool simd) {
#if STOKER_YCC_X86
  if (simd && kHaveAvx2) return YccToPlanesAvx2(y, cb, cr, n, r, g, b);
#endif
  (void)simd;
  YccToPlanesScalar(y, cb, cr, n, r, g, b);
}

}  // namespace stoker
