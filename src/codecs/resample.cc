// codecs/resample.cc — Pillow-exact antialiased resample (see header).
// The vertical pass runs over whole rows of the horizontal pass's output
// (contiguous bytes); the horizontal pass is a short dot product per output
// pixel. Both have an x86 SIMD version picked at run time (see header).
// Thread-safety: pure functions.
#include "codecs/resample.h"

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

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace

void PlanResampleAxis(Resample filter, int in_size, double in0_d, double in1_d, int out_size, int first, int count,
                      ResampleAxis* a) {
  // Pillow takes the box as C floats.
  const float in0 = static_cast<float>(in0_d), in1 = static_cast<float>(in1_d);
  double (*fn)(double) = filter == Resample::kBicubic ? BicubicFilter : BilinearFilter;
  const double base_support = filter == Resample::kBicubic ? 2.0 : 1.0;
  double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = base_support * filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  a->first = first;
  a->count = count;
  a->in_size = in_size;
  a->ksize = ksize;
  a->identity = out_size == in_size && in0 == 0.0f && in1 == static_cast<float>(out_size);
  a->start.assign(count, 0);
  a->taps.assign(count, 0);
  a->coeff.assign(static_cast<size_t>(count) * ksize, 0);
  a->src_lo = in_size;
  a->src_hi = 0;
  std::vector<double> k(ksize);
  for (int i = 0; i < count; ++i) {
    const int xx = first + i;
    if (a->identity) {
      a->start[i] = xx;
      a->taps[i] = 1;
      a->coeff[static_cast<size_t>(i) * ksize] = 1 << kPrecisionBits;
    } else {
      const double center = in0 + (xx + 0.5) * scale;
      const double ss = 1.0 / filterscale;
      int xmin = static_cast<int>(center - support + 0.5);
      if (xmin < 0) xmin = 0;
      int xmax = static_cast<int>(center + support + 0.5);
      if (xmax > in_size) xmax = in_size;
      xmax -= xmin;
      double ww = 0.0;
      for (int x = 0; x < xmax; ++x) {
        const double w = fn((x + xmin - center + 0.5) * ss);
        k[x] = w;
        ww += w;
      }
      int32_t* kk = &a->coeff[static_cast<size_t>(i) * ksize];
      for (int x = 0; x < xmax; ++x) {
        double w = k[x];
        if (ww != 0.0) w /= ww;
        kk[x] = w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                      : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
      }
      a->start[i] = xmin;
      a->taps[i] = std::max(xmax, 0);
    }
    if (a->taps[i] > 0) {
      a->src_lo = std::min(a->src_lo, a->start[i]);
      a->src_hi = std::max(a->src_hi, a->start[i] + a->taps[i]);
    }
  }
  if (a->src_lo >= a->src_hi) a->src_lo = a->src_hi = 0;
  a->pairs = (ksize + 1) / 2;
  a->pair_hi.assign(static_cast<size_t>(count) * a->pairs, 0);
  a->pair_lo.assign(static_cast<size_t>(count) * a->pairs, 0);
  for (int i = 0; i < count; ++i) {
    const int32_t* k = &a->coeff[static_cast<size_t>(i) * ksize];
    for (int j = 0; j < a->pairs; ++j) {
      const int32_t k0 = k[2 * j], k1 = 2 * j + 1 < ksize ? k[2 * j + 1] : 0;
      // hi = k >> 11 (floor), lo = k & 2047: both fit int16.
      const uint32_t h0 = static_cast<uint16_t>(k0 >> 11), h1 = static_cast<uint16_t>(k1 >> 11);
      const uint32_t l0 = static_cast<uint32_t>(k0 & 2047), l1 = static_cast<uint32_t>(k1 & 2047);
      a->pair_hi[static_cast<size_t>(i) * a->pairs + j] = static_cast<int32_t>(h0 | (h1 << 16));
      a->pair_lo[static_cast<size_t>(i) * a->pairs + j] = static_cast<int32_t>(l0 | (l1 << 16));
    }
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
    // The 4-byte load of the axis's last pixel would read past the row
    // (possibly past the buffer): that tap is loaded by bytes.
    const bool last = ax.start[i] + n >= ax.in_size;
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

// Two output pixels per 256-bit vector (one per 128-bit lane), two taps per
// pmaddwd: the bytes of pixels x, x+1 are shuffled to 16-bit pairs
// (R_x, R_x+1, G_x, G_x+1, B_x, B_x+1, 0, 0) and multiplied by the weights'
// 11-bit halves; sum = (sum_hi << 11) + sum_lo is the exact 32-bit sum.
// Taps past an output's own list have weight 0 (Pillow's padding). A pair
// whose 8-byte loads could pass the axis's last pixel goes to the SSE4.1 loop.
__attribute__((target("avx2"))) void HorizontalRowAvx2(const ResampleAxis& ax, const uint8_t* s, int src_x0,
                                                        uint8_t* d) {
  const int np = ax.pairs;
  const __m256i shuf = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                        0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  int i = 0;
  for (; i + 1 < ax.count; i += 2) {
    const int s0 = ax.start[i], s1 = ax.start[i + 1];
    const int n = (std::max(ax.taps[i], ax.taps[i + 1]) + 1) / 2;  // tap pairs
    if (s0 + 2 * n >= ax.in_size || s1 + 2 * n >= ax.in_size) break;
    const uint8_t* p0 = s + static_cast<size_t>(s0 - src_x0) * 3;
    const uint8_t* p1 = s + static_cast<size_t>(s1 - src_x0) * 3;
    const int32_t* h0 = &ax.pair_hi[static_cast<size_t>(i) * np];
    const int32_t* l0 = &ax.pair_lo[static_cast<size_t>(i) * np];
    const int32_t* h1 = h0 + np;
    const int32_t* l1 = l0 + np;
    __m256i acc_hi = _mm256_setzero_si256(), acc_lo = _mm256_setzero_si256();
    for (int j = 0; j < n; ++j) {
      const __m256i raw = _mm256_set_m128i(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + 6 * j)),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + 6 * j)));
      const __m256i px = _mm256_shuffle_epi8(raw, shuf);
      acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(px, _mm256_set_m128i(_mm_set1_epi32(h1[j]),
                                                                                 _mm_set1_epi32(h0[j]))));
      acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(px, _mm256_set_m128i(_mm_set1_epi32(l1[j]),
                                                                                 _mm_set1_epi32(l0[j]))));
    }
    __m256i acc = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(acc_hi, 11), acc_lo),
                                   _mm256_set1_epi32(kHalf));
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    const uint64_t v8 = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(v16, v16)));
    const uint32_t a8 = static_cast<uint32_t>(v8), b8 = static_cast<uint32_t>(v8 >> 32);
    std::memcpy(d + 3 * i, &a8, 3);
    std::memcpy(d + 3 * i + 3, &b8, 3);
  }
  // The rest (near the row's end): one pixel at a time.
  if (i < ax.count) HorizontalRowSse41From(ax, i, s, src_x0, d);
}

// 8 output bytes per 256-bit vector, the taps' sum kept in a register.
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* const* rows, const int32_t* k, int n,
                                                      size_t bytes, uint8_t* d) {
  size_t j = 0;
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

const bool kHaveSse41 = __builtin_cpu_supports("sse4.1");
const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#endif

void HorizontalRow(const ResampleAxis& ax, const uint8_t* s, int src_x0, uint8_t* d) {
  if (ax.identity) {
    std::memcpy(d, s + static_cast<size_t>(ax.first - src_x0) * 3, static_cast<size_t>(ax.count) * 3);
    return;
  }
#if STOKER_RESAMPLE_X86
  if (kHaveAvx2) return HorizontalRowAvx2(ax, s, src_x0, d);
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

}  // namespace

void ResampleRgb(const ResampleAxis& ax, const ResampleAxis& ay, const uint8_t* src, size_t src_stride, int src_x0,
                 int src_y0, uint8_t* dst, size_t dst_stride, std::vector<uint8_t>* tmp) {
  const size_t row_bytes = static_cast<size_t>(ax.count) * 3;
  if (ay.identity) {  // horizontal pass only, straight into dst
    for (int i = 0; i < ay.count; ++i) {
      HorizontalRow(ax, src + static_cast<size_t>(ay.first + i - src_y0) * src_stride, src_x0,
                    dst + static_cast<size_t>(i) * dst_stride);
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
      HorizontalRow(ax, src + static_cast<size_t>(ay.src_lo + y - src_y0) * src_stride, src_x0, t + row_bytes * y);
    }
    mid = t;
    mid_stride = row_bytes;
  }
  // Vertical pass: each output row from ay.taps rows of `mid`.
  const int ks = ay.ksize;
  const uint8_t* tap_rows[64];
  std::vector<const uint8_t*> many;
  const uint8_t** rp = tap_rows;
  if (ks > 64) {
    many.resize(ks);
    rp = many.data();
  }
  for (int i = 0; i < ay.count; ++i) {
    const int n = ay.taps[i];
    for (int y = 0; y < n; ++y) rp[y] = mid + static_cast<size_t>(ay.start[i] + y - ay.src_lo) * mid_stride;
    VerticalRow(rp, &ay.coeff[static_cast<size_t>(i) * ks], n, row_bytes, dst + static_cast<size_t>(i) * dst_stride);
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
