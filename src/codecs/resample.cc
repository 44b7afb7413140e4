// codecs/resample.cc — Pillow-exact antialiased resample (see header).
// The vertical pass runs over whole rows of the horizontal pass's output
// (contiguous bytes); the horizontal pass is a short dot product per output
// pixel. Both have an x86 SIMD version picked at run time (see header).
// Thread-safety: pure functions.
#include "codecs/resample.h"

#include "codecs/resample_taps.h"


#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define STOKER_RESAMPLE_X86 1
#else
#define STOKER_RESAMPLE_X86 0
#endif

namespace stoker {
namespace {

using taps::Clip8;
using taps::kHalf;
using taps::kPrecisionBits;

void ComputeAxis(Resample filter, int in_size, double in0_d, double in1_d, int out_size, int first, int count,
                 ResampleAxis* a) {
  const taps::Axis axis = taps::MakeAxis(filter == Resample::kBicubic ? taps::kBicubic : taps::kBilinear, in_size,
                                         in0_d, in1_d, out_size);
  const int ksize = axis.ksize;
  a->first = first;
  a->count = count;
  a->in_size = in_size;
  a->ksize = ksize;
  a->identity = axis.identity;
  a->start.assign(count, 0);
  a->taps.assign(count, 0);
  a->coeff.assign(static_cast<size_t>(count) * ksize, 0);
  a->src_lo = in_size;
  a->src_hi = 0;
  for (int i = 0; i < count; ++i) {
    const taps::Window w = taps::WindowOf(axis, first + i);
    int32_t* kk = &a->coeff[static_cast<size_t>(i) * ksize];
    for (int x = 0; x < w.count; ++x) kk[x] = taps::Weight(axis, w, x);
    a->start[i] = w.first;
    a->taps[i] = w.count;
    if (a->taps[i] > 0) {
      a->src_lo = std::min(a->src_lo, a->start[i]);
      a->src_hi = std::max(a->src_hi, a->start[i] + a->taps[i]);
    }
  }
  if (a->src_lo >= a->src_hi) a->src_lo = a->src_hi = 0;
  a->start3.resize(count);
  for (int i = 0; i < count; ++i) a->start3[i] = 3 * a->start[i];
  a->quads = (ksize + 3) / 4;
  a->quad_k.assign(static_cast<size_t>(count) * a->quads * 32, 0);
  a->out_quads.assign(count, 0);
  for (int i = 0; i < count; ++i) {
    const int32_t* k = &a->coeff[static_cast<size_t>(i) * ksize];
    a->out_quads[i] = static_cast<uint8_t>(std::min((a->taps[i] + 3) / 4, a->quads));
    for (int g = 0; g < a->quads; ++g) {
      int16_t* q = &a->quad_k[(static_cast<size_t>(i) * a->quads + g) * 32];
      for (int t = 0; t < 4; ++t) {
        const int32_t kt = 4 * g + t < ksize ? k[4 * g + t] : 0;
        // hi = k >> 11 (floor), lo = k & 2047: both fit int16.
        const auto hi = static_cast<int16_t>(kt >> 11), lo = static_cast<int16_t>(kt & 2047);
        q[t] = q[4 + t] = q[8 + t] = hi;  // R, G | B
        q[16 + t] = q[20 + t] = q[24 + t] = lo;
      }
    }
  }
  // Group g of output i loads bytes [3 start + 12 g, + 16): past src_hi the
  // caller's buffer may end (the last row of a region).
  a->max_quads = 0;
  for (int i = 0; i < count; ++i) a->max_quads = std::max<int>(a->max_quads, a->out_quads[i]);
  // Planar pass: <= 4 taps each, and outputs i..i+3 within one 16-byte load
  // from start[i].
  a->planar = !a->identity && count > 0;
  for (int i = 0; i < count && a->planar; ++i) {
    if (a->taps[i] > 4) a->planar = false;
    if (a->start[std::min(i + 3, count - 1)] + 4 - a->start[i] > 16) a->planar = false;
  }
  if (a->planar) {
    a->planar_hi.assign(static_cast<size_t>(count) * 4, 0);
    a->planar_lo.assign(static_cast<size_t>(count) * 4, 0);
    a->planar_mask.assign(static_cast<size_t>(count) * 32, 0x80);
    for (int i = 0; i < count; ++i) {
      const int32_t* k = &a->coeff[static_cast<size_t>(i) * ksize];
      for (int t = 0; t < 4; ++t) {
        const int32_t kt = t < a->taps[i] ? k[t] : 0;
        a->planar_hi[4 * i + t] = static_cast<int16_t>(kt >> 11);
        a->planar_lo[4 * i + t] = static_cast<int16_t>(kt & 2047);
      }
      // Lane 0 words 0-3: output i's taps, 4-7: output i+1's, lane 1 outputs
      // i+2, i+3, as bytes from start[i] zero-extended (a tap past an
      // output's own has weight 0; it still reads a byte inside the load).
      uint8_t* m = &a->planar_mask[static_cast<size_t>(i) * 32];
      for (int o = 0; o < 4; ++o) {
        const int j = std::min(i + o, count - 1);
        for (int t = 0; t < 4; ++t) m[2 * (4 * o + t)] = static_cast<uint8_t>(std::min(a->start[j] + t - a->start[i], 15));
      }
    }
    const size_t c2 = static_cast<size_t>(count) * 2;
    a->pair_k.assign(4 * c2, 0);
    a->pair_mask.assign(static_cast<size_t>(count) * 64, 0x80);
    for (int i = 0; i < count; ++i) {
      for (int t = 0; t < 4; ++t) {
        const size_t at = (t < 2 ? 0 : c2) + 2 * static_cast<size_t>(i) + (t & 1);
        a->pair_k[at] = a->planar_hi[4 * i + t];
        a->pair_k[2 * c2 + at] = a->planar_lo[4 * i + t];
      }
      // Mask half h (taps 2h, 2h + 1), lane l: outputs b..b+3, b = i + 4 l,
      // bytes counted from start[b].
      uint8_t* m = &a->pair_mask[static_cast<size_t>(i) * 64];
      for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 2; ++l) {
          const int b = std::min(i + 4 * l, count - 1);
          for (int o = 0; o < 4; ++o) {
            const int j = std::min(b + o, count - 1);
            for (int t = 0; t < 2; ++t) {
              m[32 * h + 16 * l + 4 * o + 2 * t] =
                  static_cast<uint8_t>(std::min(a->start[j] + 2 * h + t - a->start[b], 15));
            }
          }
        }
      }
    }
  }
  // The fast outputs are a prefix (the kernel walks them in order).
  a->quad_end = 0;
  while (a->quad_end < count) {
    const int i = a->quad_end;
    if (a->max_quads > 0 && 3 * a->start[i] + 12 * (a->max_quads - 1) + 16 > 3 * a->src_hi) break;
    ++a->quad_end;
  }
}

// The last axes planned on this thread. A loader's images mostly share a
// few sizes (and every image of a center crop one geometry), and planning
// (the filter in double per tap, a division per output) costs about as much
// as a tenth of the resample itself; a copy of the cached axis is the same
// integers.
using AxisKey = ResampleAxisKey;
struct CachedAxis {
  AxisKey key;
  ResampleAxis axis;
};
constexpr size_t kAxisCacheSize = 8;
thread_local std::vector<CachedAxis> t_axis_cache;  // most recent last
thread_local size_t t_axis_next = 0;                // slot replaced next once full

}  // namespace

void PlanResampleAxis(Resample filter, int in_size, double in0, double in1, int out_size, int first, int count,
                      ResampleAxis* a) {
  const AxisKey key{filter, in_size, in0, in1, out_size, first, count};
  if (a->planned && a->planned_for == key) return;  // a decoder's plan, kept from its last image
  for (const CachedAxis& c : t_axis_cache) {
    if (c.key == key) {
      *a = c.axis;
      return;
    }
  }
  ComputeAxis(filter, in_size, in0, in1, out_size, first, count, a);
  a->planned_for = key;
  a->planned = true;
  if (t_axis_cache.size() < kAxisCacheSize) {
    t_axis_cache.push_back({key, *a});
  } else {
    t_axis_cache[t_axis_next] = {key, *a};
    t_axis_next = (t_axis_next + 1) % kAxisCacheSize;
  }
}

namespace {

// One row: ax.count RGB outputs from the source row `s` (pixel src_x0 first).
void HorizontalRowScalar(const ResampleAxis& ax, const uint8_t* s, int src_x0, uint8_t* d) {
  const int ks = ax.ksize;
  for (int i = 0; i < ax.count; ++i) {
    const uint8_t* p = s + static_cast<size_t>(ax.start[i] - src_x0) * 3;
    const int32_t* k = &ax.coeff[static_cast<size_t>(i) * ks];
    int32_t r = kHalf, g = kHalf, b = kHalf;
    const int n = ax.taps[i];
    for (int x = 0; x < n; ++x) {
      r += p[3 * x] * k[x];
      g += p[3 * x + 1] * k[x];
      b += p[3 * x + 2] * k[x];
    }
    d[3 * i] = Clip8(r);
    d[3 * i + 1] = Clip8(g);
    d[3 * i + 2] = Clip8(b);
  }
}

// rows[y] + j: the bytes of tap y; n taps; `bytes` outputs.
void VerticalRowScalar(const uint8_t* const* rows, const int32_t* k, int n, size_t bytes, uint8_t* d) {
  for (size_t j = 0; j < bytes; ++j) {
    int32_t acc = kHalf;
    for (int y = 0; y < n; ++y) acc += rows[y][j] * k[y];
    d[j] = Clip8(acc);
  }
}

#if STOKER_RESAMPLE_X86
// One pixel's R,G,B (and a 4th byte, ignored) per 128-bit vector.
__attribute__((target("sse4.1"))) void HorizontalRowSse41From(const ResampleAxis& ax, int from, const uint8_t* s,
                                                              int src_x0, uint8_t* d) {
  const int ks = ax.ksize;
  for (int i = from; i < ax.count; ++i) {
    const uint8_t* p = s + static_cast<size_t>(ax.start[i] - src_x0) * 3;
    const int32_t* k = &ax.coeff[static_cast<size_t>(i) * ks];
    int n = ax.taps[i];
    __m128i acc = _mm_set1_epi32(kHalf);
    // The 4-byte load of the last pixel the window reads (src_hi - 1) would
    // pass what the caller must provide (possibly the buffer's end): that
    // tap is loaded by bytes.
    const bool last = ax.start[i] + n >= ax.src_hi;
    if (last) --n;
    for (int x = 0; x < n; ++x) {
      int32_t v;
      std::memcpy(&v, p + 3 * x, 4);
      const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
      acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[x])));
    }
    if (last) {
      const uint8_t* q = p + 3 * n;
      const __m128i px = _mm_setr_epi32(q[0], q[1], q[2], 0);
      acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[n])));
    }
    const __m128i v16 = _mm_packs_epi32(_mm_srai_epi32(acc, kPrecisionBits), acc);
    const int32_t v8 = _mm_cvtsi128_si32(_mm_packus_epi16(v16, v16));
    std::memcpy(d + 3 * i, &v8, 3);
  }
}

// One output pixel per 256-bit vector, four taps per pmaddwd: the 16 bytes
// at a group's first tap (4 pixels and 4 spare bytes) are broadcast to both
// lanes and shuffled to 16-bit (R0 R1 R2 R3 G0 G1 G2 G3 | B0 B1 B2 B3 0 0 0 0),
// then multiplied by the weights' 11-bit halves (quad_k);
// sum = (sum_hi << 11) + sum_lo is the exact 32-bit sum. Taps past an
// output's own list have weight 0 (Pillow's padding). Returns the pair sums
// [R01 R23 G01 G23 | B01 B23 0 0].
// G > 0: every output takes G groups (the plan's max_quads; groups past an
// output's own are zero weights), so the loop has no branch per output.
// G == 0: each output its own count.
template <int G>
__attribute__((target("avx2"))) inline __m256i QuadSums(const ResampleAxis& ax, int i, const uint8_t* s0,
                                                         const int16_t* q, __m256i shuf) {
  const uint8_t* p = s0 + ax.start3[i];
  __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
  const int groups = G > 0 ? G : ax.out_quads[i];
  for (int g = 0; g < groups; ++g, p += 12, q += 32) {
    const __m256i px =
        _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), shuf);
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))));
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(px, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16))));
  }
  return _mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo);
}

// Four outputs per step: phaddd turns two outputs' pair sums into their
// R, G | B sums; the rounding and clamping are Clip8's (shift, then
// saturating packs). Outputs from fast_end on (their loads could pass the
// buffer) and the last few go to the SSE4.1 loop.
template <int G>
__attribute__((target("avx2"))) void HorizontalRowAvx2(const ResampleAxis& ax, const uint8_t* s, int src_x0,
                                                        uint8_t* d, int fast_end) {
  const __m256i shuf = _mm256_setr_epi8(0, -1, 3, -1, 6, -1, 9, -1, 1, -1, 4, -1, 7, -1, 10, -1,  //
                                        2, -1, 5, -1, 8, -1, 11, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  // (aR aG bR bG cR cG dR dG | aB 0 bB 0 cB 0 dB 0) -> aR aG aB bR ... dB
  const __m128i order = _mm_setr_epi8(0, 1, 8, 2, 3, 10, 4, 5, 12, 6, 7, 14, -1, -1, -1, -1);
  const __m256i half = _mm256_set1_epi32(kHalf);
  // Pixel 0 of the axis (start3 counts from it), and the weights walked in order.
  const uint8_t* s0 = s - static_cast<ptrdiff_t>(src_x0) * 3;
  const size_t qs = static_cast<size_t>(ax.quads) * 32;
  const int16_t* q = ax.quad_k.data();
  int i = 0;
  for (; i + 4 <= fast_end; i += 4, q += 4 * qs) {
    const __m256i a = QuadSums<G>(ax, i, s0, q, shuf), b = QuadSums<G>(ax, i + 1, s0, q + qs, shuf);
    const __m256i c = QuadSums<G>(ax, i + 2, s0, q + 2 * qs, shuf), e = QuadSums<G>(ax, i + 3, s0, q + 3 * qs, shuf);
    const __m256i ab = _mm256_srai_epi32(_mm256_add_epi32(_mm256_hadd_epi32(a, b), half), kPrecisionBits);
    const __m256i ce = _mm256_srai_epi32(_mm256_add_epi32(_mm256_hadd_epi32(c, e), half), kPrecisionBits);
    const __m256i w16 = _mm256_packs_epi32(ab, ce);
    const __m256i w8 = _mm256_packus_epi16(w16, w16);
    const __m128i x = _mm_shuffle_epi8(_mm256_castsi256_si128(_mm256_permute4x64_epi64(w8, 0x08)), order);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + 3 * i), x);
    const uint32_t tail = static_cast<uint32_t>(_mm_extract_epi32(x, 2));
    std::memcpy(d + 3 * i + 8, &tail, 4);
  }
  if (i < ax.count) HorizontalRowSse41From(ax, i, s, src_x0, d);
}

// 8 output bytes per 256-bit vector, the taps' sum kept in a register.
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* const* rows, const int32_t* k, int n,
                                                      size_t bytes, uint8_t* d) {
  size_t j = 0;
  // 32 bytes per step: four accumulators share each tap's weight, and one
  // pack and store serve them all.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (; j + 32 <= bytes; j += 32) {
    __m256i a0 = _mm256_set1_epi32(kHalf), a1 = a0, a2 = a0, a3 = a0;
    for (int y = 0; y < n; ++y) {
      const uint8_t* r = rows[y] + j;
      const __m256i w = _mm256_set1_epi32(k[y]);
      a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                        reinterpret_cast<const __m128i*>(r))), w));
      a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                        reinterpret_cast<const __m128i*>(r + 8))), w));
      a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                        reinterpret_cast<const __m128i*>(r + 16))), w));
      a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                        reinterpret_cast<const __m128i*>(r + 24))), w));
    }
    // packs/packus work per 128-bit lane: (a0 lo, a1 lo, a2 lo, a3 lo |
    // a0 hi, ...) in 4-byte groups, put back in order by the permute.
    const __m256i p01 = _mm256_packs_epi32(_mm256_srai_epi32(a0, kPrecisionBits), _mm256_srai_epi32(a1, kPrecisionBits));
    const __m256i p23 = _mm256_packs_epi32(_mm256_srai_epi32(a2, kPrecisionBits), _mm256_srai_epi32(a3, kPrecisionBits));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j),
                        _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), order));
  }
  for (; j + 8 <= bytes; j += 8) {
    __m256i acc = _mm256_set1_epi32(kHalf);
    for (int y = 0; y < n; ++y) {
      const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[y] + j)));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, _mm256_set1_epi32(k[y])));
    }
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + j), _mm_packus_epi16(v16, v16));
  }
  for (; j < bytes; ++j) {
    int32_t acc = kHalf;
    for (int y = 0; y < n; ++y) acc += rows[y][j] * k[y];
    d[j] = Clip8(acc);
  }
}

// Planar horizontal pass of one channel row (s: pixel ax.src_lo) into d:
// 16 outputs per step. Per 256-bit vector four outputs: the 16
// bytes at start[i] in both lanes, the taps of outputs i, i+1 (lane 0) and
// i+2, i+3 (lane 1) as words by pshufb, times the 11-bit weight halves
// (pmaddwd); phaddd adds the pair sums; the rounding and clamping are
// Clip8's. The last step overlaps the one before (same bytes). count >= 16.
__attribute__((target("avx2"))) void HorizontalPlanarAvx2(const ResampleAxis& ax, const uint8_t* s, uint8_t* d) {
  const int n = ax.count;
  const uint8_t* s0 = s - ax.src_lo;
  const __m256i half = _mm256_set1_epi32(kHalf);
  // (0 1 4 5 8 9 12 13 | 2 3 6 7 10 11 14 15) after the lane merge -> 0..15
  const __m128i order = _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  for (int i = 0;; i += 16) {
    if (i + 16 > n) i = n - 16;
    __m256i sums[4];
    for (int q = 0; q < 4; ++q) {
      const int o = i + 4 * q;
      const __m256i w = _mm256_shuffle_epi8(
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + ax.start[o]))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&ax.planar_mask[32 * o])));
      const __m256i hi =
          _mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&ax.planar_hi[4 * o])));
      const __m256i lo =
          _mm256_madd_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&ax.planar_lo[4 * o])));
      sums[q] = _mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo);
    }
    // hadd: (o0 o1 o4 o5 | o2 o3 o6 o7), (o8 o9 o12 o13 | o10 o11 o14 o15)
    const __m256i ab = _mm256_srai_epi32(_mm256_add_epi32(_mm256_hadd_epi32(sums[0], sums[1]), half), kPrecisionBits);
    const __m256i ce = _mm256_srai_epi32(_mm256_add_epi32(_mm256_hadd_epi32(sums[2], sums[3]), half), kPrecisionBits);
    const __m256i w16 = _mm256_packs_epi32(ab, ce);  // (0 1 4 5 8 9 12 13 | 2 3 6 7 10 11 14 15)
    const __m256i w8 = _mm256_packus_epi16(w16, w16);
    const __m128i x = _mm256_castsi256_si128(_mm256_permute4x64_epi64(w8, 0x08));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_shuffle_epi8(x, order));
    if (i + 16 == n) break;
  }
}

// Outputs i..i+7 of the three channel rows (G, B plane_stride and
// 2 plane_stride after R), lane 0 i..i+3, lane 1 i+4..i+7: the masks and
// weights are loaded once for the three channels; each channel's taps 0-1
// and 2-3 are picked as words from its two 16-byte windows, and the four
// pmaddwd (11-bit weight halves, as quad_k) give whole sums, rounded and
// shifted.
__attribute__((target("avx2"))) inline void Planar3Eight(const ResampleAxis& ax, const uint8_t* s0,
                                                          size_t plane_stride, int i, __m256i out[3]) {
  const size_t c2 = static_cast<size_t>(ax.count) * 2;
  const int16_t* k = &ax.pair_k[2 * static_cast<size_t>(i)];
  const __m256i m01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&ax.pair_mask[64 * static_cast<size_t>(i)]));
  const __m256i m23 =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&ax.pair_mask[64 * static_cast<size_t>(i) + 32]));
  const __m256i h01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k));
  const __m256i h23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + c2));
  const __m256i l01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 2 * c2));
  const __m256i l23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 3 * c2));
  const __m256i half = _mm256_set1_epi32(kHalf);
  const uint8_t* p = s0 + ax.start[i];
  const ptrdiff_t d4 = ax.start[i + 4] - ax.start[i];
  for (int c = 0; c < 3; ++c, p += plane_stride) {
    const __m256i w = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d4)), 1);
    const __m256i a = _mm256_shuffle_epi8(w, m01), b = _mm256_shuffle_epi8(w, m23);
    const __m256i hi = _mm256_add_epi32(_mm256_madd_epi16(a, h01), _mm256_madd_epi16(b, h23));
    const __m256i lo = _mm256_add_epi32(_mm256_madd_epi16(a, l01), _mm256_madd_epi16(b, l23));
    out[c] = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), half),
                               kPrecisionBits);
  }
}

// The planar pass of the three channel rows, 32 outputs per step (four
// Planar3Eight; per channel two packs, one packus, one permd and one store),
// or 16 when count < 32. count >= 16; the last step overlaps the one before
// (same bytes).
__attribute__((target("avx2"))) void HorizontalPlanar3Avx2(const ResampleAxis& ax, const uint8_t* r,
                                                            size_t plane_stride, uint8_t* d) {
  const int n = ax.count;
  const uint8_t* s0 = r - ax.src_lo;
  // packs/packus leave (0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31) in
  // 4-byte groups (with 16 outputs: 0-3 8-11 0-3 8-11 | 4-7 12-15 ...).
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  if (n < 32) {
    for (int i = 0;; i += 16) {
      if (i + 16 > n) i = n - 16;
      __m256i a[3], b[3];
      Planar3Eight(ax, s0, plane_stride, i, a);
      Planar3Eight(ax, s0, plane_stride, i + 8, b);
      for (int c = 0; c < 3; ++c) {
        const __m256i w16 = _mm256_packs_epi32(a[c], b[c]);
        const __m256i w8 = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w16, w16), order);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + c * n + i), _mm256_castsi256_si128(w8));
      }
      if (i + 16 == n) break;
    }
    return;
  }
  for (int i = 0;; i += 32) {
    if (i + 32 > n) i = n - 32;
    __m256i a[3], b[3], lo[3];
    Planar3Eight(ax, s0, plane_stride, i, a);
    Planar3Eight(ax, s0, plane_stride, i + 8, b);
    for (int c = 0; c < 3; ++c) lo[c] = _mm256_packs_epi32(a[c], b[c]);
    Planar3Eight(ax, s0, plane_stride, i + 16, a);
    Planar3Eight(ax, s0, plane_stride, i + 24, b);
    for (int c = 0; c < 3; ++c) {
      const __m256i w8 = _mm256_packus_epi16(lo[c], _mm256_packs_epi32(a[c], b[c]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c * n + i), _mm256_permutevar8x32_epi32(w8, order));
    }
    if (i + 32 == n) break;
  }
}

const bool kHaveSse41 = __builtin_cpu_supports("sse4.1");
const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#endif

// fast_end: outputs [0, fast_end) may take the AVX2 loads (ax.quad_end, or
// more where the row is not the buffer's last: see ResampleRgb).
void HorizontalRow(const ResampleAxis& ax, const uint8_t* s, int src_x0, uint8_t* d, int fast_end) {
  if (ax.identity) {
    std::memcpy(d, s + static_cast<size_t>(ax.first - src_x0) * 3, static_cast<size_t>(ax.count) * 3);
    return;
  }
#if STOKER_RESAMPLE_X86
  if (kHaveAvx2) {
    if (ax.max_quads == 1) return HorizontalRowAvx2<1>(ax, s, src_x0, d, fast_end);
    if (ax.max_quads == 2) return HorizontalRowAvx2<2>(ax, s, src_x0, d, fast_end);
    return HorizontalRowAvx2<0>(ax, s, src_x0, d, fast_end);
  }
  if (kHaveSse41) return HorizontalRowSse41From(ax, 0, s, src_x0, d);
#endif
  HorizontalRowScalar(ax, s, src_x0, d);
}

void VerticalRow(const uint8_t* const* rows, const int32_t* k, int n, size_t bytes, uint8_t* d) {
#if STOKER_RESAMPLE_X86
  if (kHaveAvx2) return VerticalRowAvx2(rows, k, n, bytes, d);
#endif
  VerticalRowScalar(rows, k, n, bytes, d);
}

// Room for one output row's source row pointers: on the stack up to 64 taps
// (a reduction up to ~32x bilinear), else on the heap.
class TapRows {
 public:
  explicit TapRows(int taps) {
    if (taps > kOnStack) heap_.resize(static_cast<size_t>(taps));
  }
  const uint8_t** data() { return heap_.empty() ? stack_ : heap_.data(); }

 private:
  static constexpr int kOnStack = 64;
  const uint8_t* stack_[kOnStack];
  std::vector<const uint8_t*> heap_;
};

// Vertical pass: each output row from ay.taps rows of `mid` (row ay.src_lo
// first, rows mid_stride bytes apart).
void VerticalPass(const ResampleAxis& ay, const uint8_t* mid, size_t mid_stride, size_t row_bytes, uint8_t* dst,
                  size_t dst_stride) {
  const int ks = ay.ksize;
  TapRows tap_rows(ks);
  const uint8_t** rp = tap_rows.data();
  for (int i = 0; i < ay.count; ++i) {
    const int n = ay.taps[i];
    for (int y = 0; y < n; ++y) rp[y] = mid + static_cast<size_t>(ay.start[i] + y - ay.src_lo) * mid_stride;
    VerticalRow(rp, &ay.coeff[static_cast<size_t>(i) * ks], n, row_bytes, dst + static_cast<size_t>(i) * dst_stride);
  }
}


// One channel row of the planar pass (s: pixel ax.src_lo) into d.
void HorizontalPlane(const ResampleAxis& ax, const uint8_t* s, uint8_t* d) {
  const int n = ax.count;
#if STOKER_RESAMPLE_X86
  if (kHaveAvx2 && n >= 16) return HorizontalPlanarAvx2(ax, s, d);
#endif
  for (int i = 0; i < n; ++i) {
    const uint8_t* p = s + (ax.start[i] - ax.src_lo);
    const int32_t* k = &ax.coeff[static_cast<size_t>(i) * ax.ksize];
    int32_t acc = kHalf;
    for (int t = 0; t < ax.taps[i]; ++t) acc += p[t] * k[t];
    d[i] = Clip8(acc);
  }
}

}  // namespace

void ResampleRgb(const ResampleAxis& ax, const ResampleAxis& ay, const uint8_t* src, size_t src_stride, int src_x0,
                 int src_y0, uint8_t* dst, size_t dst_stride, std::vector<uint8_t>* tmp) {
  const size_t row_bytes = static_cast<size_t>(ax.count) * 3;
  // The AVX2 horizontal pass loads 16 bytes per 4 taps, up to
  // 12 (max_quads - 1) + 16 bytes from an output's first tap: past src_hi for
  // the last outputs. On any row but the last one read, those bytes lie in
  // the next row (the buffer is one block of src_stride-byte rows), so every
  // output may take it; on the last row only the plan's quad_end.
  int inner_end = ax.quad_end;
  if (ax.count > 0 && ax.max_quads > 0 &&
      3 * static_cast<int64_t>(ax.start[ax.count - 1]) + 12 * (ax.max_quads - 1) + 16 <=
          3 * static_cast<int64_t>(ax.src_hi) + static_cast<int64_t>(src_stride)) {
    inner_end = ax.count;
  }
  if (ay.identity) {  // horizontal pass only, straight into dst
    for (int i = 0; i < ay.count; ++i) {
      HorizontalRow(ax, src + static_cast<size_t>(ay.first + i - src_y0) * src_stride, src_x0,
                    dst + static_cast<size_t>(i) * dst_stride, i + 1 < ay.count ? inner_end : ax.quad_end);
    }
    return;
  }
  // Horizontal pass over the source rows the vertical window reads (Pillow's
  // ybox_first..ybox_last, narrowed to the window), or those rows as they are.
  const int rows = ay.src_hi - ay.src_lo;
  const uint8_t* mid;
  size_t mid_stride;
  if (ax.identity) {
    mid = src + static_cast<size_t>(ay.src_lo - src_y0) * src_stride + static_cast<size_t>(ax.first - src_x0) * 3;
    mid_stride = src_stride;
  } else {
    const size_t need = row_bytes * rows;
    if (tmp->size() < need) tmp->resize(need);
    uint8_t* t = tmp->data();
    for (int y = 0; y < rows; ++y) {
      HorizontalRow(ax, src + static_cast<size_t>(ay.src_lo + y - src_y0) * src_stride, src_x0, t + row_bytes * y,
                    y + 1 < rows ? inner_end : ax.quad_end);
    }
    mid = t;
    mid_stride = row_bytes;
  }
  VerticalPass(ay, mid, mid_stride, row_bytes, dst, dst_stride);
}

size_t ResampleRowSlack(const ResampleAxis& ax) {
  // The AVX2 horizontal pass loads up to 12 (max_quads - 1) + 16 bytes from an
  // output's first tap, which lies within ksize pixels of src_hi.
  return static_cast<size_t>(3 * ax.ksize + 12 * ax.max_quads + 32);
}

void ResampleRgbRows(const ResampleAxis& ax, const ResampleAxis& ay, ResampleRowFn row, void* ctx, uint8_t* dst,
                     size_t dst_stride, std::vector<uint8_t>* tmp) {
  const size_t row_bytes = static_cast<size_t>(ax.count) * 3;
  // Every row has the slack the AVX2 loads need: every output takes them.
  if (ay.identity) {
    for (int i = 0; i < ay.count; ++i) {
      HorizontalRow(ax, row(ctx, ay.first + i), ax.src_lo, dst + static_cast<size_t>(i) * dst_stride, ax.count);
    }
    return;
  }
  const int rows = ay.src_hi - ay.src_lo;
  const size_t need = row_bytes * rows;
  if (tmp->size() < need) tmp->resize(need);
  uint8_t* t = tmp->data();
  for (int y = 0; y < rows; ++y) HorizontalRow(ax, row(ctx, ay.src_lo + y), ax.src_lo, t + row_bytes * y, ax.count);
  VerticalPass(ay, t, row_bytes, row_bytes, dst, dst_stride);
}

void ResampleRgbPlanarRows(const ResampleAxis& ax, const ResampleAxis& ay, ResampleRowFn row, void* ctx,
                           size_t plane_stride, uint8_t* dst, size_t dst_stride, size_t dst_plane,
                           std::vector<uint8_t>* tmp) {
  // Each source row becomes a row of R | G | B outputs (count bytes each) in
  // a ring of ksize + 1 rows (a few KB: it stays in L1); an output row is
  // made, one channel at a time, as soon as its last tap row is in. Output
  // row i reads rows [start[i], start[i] + taps[i]), starts never decrease,
  // and taps <= ksize, so no row it reads has been overwritten.
  const int n = ax.count;
  const size_t row_bytes = static_cast<size_t>(n) * 3;
  const int ring = ay.identity ? 1 : ay.ksize + 1;
  if (tmp->size() < row_bytes * ring) tmp->resize(row_bytes * ring);
  uint8_t* mid = tmp->data();
  const int ks = ay.ksize;
  TapRows tap_rows(ks);
  const uint8_t** rp = tap_rows.data();
  const int first = ay.identity ? ay.first : ay.src_lo;
  const int last = ay.identity ? ay.first + ay.count : ay.src_hi;
  int next = 0;  // the next output row to make (start + taps never decreases either)
  for (int y = first; y < last; ++y) {
    const uint8_t* r = row(ctx, y);
    uint8_t* m = mid + row_bytes * ((y - first) % ring);
    // Gray (plane_stride 0): R = G = B, so only the R row is resampled, in
    // both passes, and each output row copied to G and B.
    const bool gray = plane_stride == 0;
    if (gray) {
      HorizontalPlane(ax, r, m);
    } else {
#if STOKER_RESAMPLE_X86
      if (kHaveAvx2 && n >= 16) {
        HorizontalPlanar3Avx2(ax, r, plane_stride, m);
      } else
#endif
      {
        for (int c = 0; c < 3; ++c) HorizontalPlane(ax, r + c * plane_stride, m + c * n);
      }
    }
    if (ay.identity) {
      for (int c = 0; c < 3; ++c) {
        std::memcpy(dst + (y - first) * dst_stride + c * dst_plane, m + (gray ? 0 : c * n), n);
      }
      continue;
    }
    for (; next < ay.count && ay.start[next] + ay.taps[next] - 1 <= y; ++next) {
      const int i = next, taps = ay.taps[i];
      int slot = (ay.start[i] - first) % ring;
      for (int t = 0; t < taps; ++t, slot = slot + 1 == ring ? 0 : slot + 1) rp[t] = mid + row_bytes * slot;
      uint8_t* out = dst + i * dst_stride;
      for (int c = 0; c < 3; ++c) {
        if (gray && c > 0) {
          std::memcpy(out + c * dst_plane, out, n);
          continue;
        }
        VerticalRow(rp, &ay.coeff[static_cast<size_t>(i) * ks], taps, n, out + c * dst_plane);
        for (int t = 0; t < taps; ++t) rp[t] += n;  // the next channel's bytes
      }
    }
  }
}

void PlanGeometryResample(const SampleGeometry& g, Resample filter, int denom, int decoded_w, int decoded_h,
                          GeometryResample* plan) {
  if (denom == 1) {
    PlanResampleAxis(filter, g.crop_w, 0, g.crop_w, g.resized_w, g.win_x, g.win_w, &plan->ax);
    PlanResampleAxis(filter, g.crop_h, 0, g.crop_h, g.resized_h, g.win_y, g.win_h, &plan->ay);
    plan->src_x0 = -g.crop_x;
    plan->src_y0 = -g.crop_y;
    return;
  }
  // The crop in scaled pixels, widened to whole pixels: the filter is
  // clamped at its edges as torchvision's crop-then-resize clamps at the crop's.
  const double d = denom;
  const int ox = g.crop_x / denom, oy = g.crop_y / denom;
  const int ex = std::min(decoded_w, (g.crop_x + g.crop_w + denom - 1) / denom);
  const int ey = std::min(decoded_h, (g.crop_y + g.crop_h + denom - 1) / denom);
  PlanResampleAxis(filter, ex - ox, g.crop_x / d - ox, (g.crop_x + g.crop_w) / d - ox, g.resized_w, g.win_x, g.win_w,
                   &plan->ax);
  PlanResampleAxis(filter, ey - oy, g.crop_y / d - oy, (g.crop_y + g.crop_h) / d - oy, g.resized_h, g.win_y, g.win_h,
                   &plan->ay);
  plan->src_x0 = -ox;
  plan->src_y0 = -oy;
}

int ChooseResampleDenom(const SampleGeometry& g) {
  for (int d : {8, 4, 2}) {
    if (g.crop_w >= kDctHeadroom * d * g.resized_w && g.crop_h >= kDctHeadroom * d * g.resized_h) return d;
  }
  return 1;
}

}  // namespace stoker
