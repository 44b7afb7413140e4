// codecs/resample.cc — Pillow-exact antialiased resample (see header).
// The vertical pass runs over whole rows of the horizontal pass's output
// (contiguous bytes, one int32 accumulator each), a loop the compiler
// vectorizes; the horizontal pass is a short dot product per output pixel.
// Thread-safety: pure functions.
#include "codecs/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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
}

namespace {

// One row: ax.count RGB outputs from the source row `s` (pixel src_x0 first).
void HorizontalRow(const ResampleAxis& ax, const uint8_t* s, int src_x0, uint8_t* d) {
  if (ax.identity) {
    std::memcpy(d, s + static_cast<size_t>(ax.first - src_x0) * 3, static_cast<size_t>(ax.count) * 3);
    return;
  }
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
    const size_t need = row_bytes * rows + static_cast<size_t>(ax.count) * 3 * sizeof(int32_t) + 64;
    if (tmp->size() < need) tmp->resize(need);
    uint8_t* t = tmp->data();
    for (int y = 0; y < rows; ++y) {
      HorizontalRow(ax, src + static_cast<size_t>(ay.src_lo + y - src_y0) * src_stride, src_x0, t + row_bytes * y);
    }
    mid = t;
    mid_stride = row_bytes;
  }
  // Vertical pass: one int32 accumulator per output byte of the row.
  std::vector<int32_t> acc_local;
  int32_t* acc;
  if (ax.identity) {
    acc_local.resize(row_bytes);
    acc = acc_local.data();
  } else {
    uintptr_t p = reinterpret_cast<uintptr_t>(tmp->data() + row_bytes * rows);
    acc = reinterpret_cast<int32_t*>((p + 63) & ~uintptr_t{63});
  }
  const int ks = ay.ksize;
  for (int i = 0; i < ay.count; ++i) {
    const int32_t* k = &ay.coeff[static_cast<size_t>(i) * ks];
    const int n = ay.taps[i];
    for (size_t j = 0; j < row_bytes; ++j) acc[j] = kHalf;
    for (int y = 0; y < n; ++y) {
      const uint8_t* r = mid + static_cast<size_t>(ay.start[i] + y - ay.src_lo) * mid_stride;
      const int32_t w = k[y];
      for (size_t j = 0; j < row_bytes; ++j) acc[j] += r[j] * w;
    }
    uint8_t* d = dst + static_cast<size_t>(i) * dst_stride;
    for (size_t j = 0; j < row_bytes; ++j) d[j] = Clip8(acc[j]);
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
  const double d = denom;
  PlanResampleAxis(filter, decoded_w, g.crop_x / d, (g.crop_x + g.crop_w) / d, g.resized_w, g.win_x, g.win_w,
                   &plan->ax);
  PlanResampleAxis(filter, decoded_h, g.crop_y / d, (g.crop_y + g.crop_h) / d, g.resized_h, g.win_y, g.win_h,
                   &plan->ay);
  plan->src_x0 = 0;
  plan->src_y0 = 0;
}

int ChooseResampleDenom(const SampleGeometry& g) {
  for (int d : {8, 4, 2}) {
    if (g.crop_w >= kDctHeadroom * d * g.resized_w && g.crop_h >= kDctHeadroom * d * g.resized_h) return d;
  }
  return 1;
}

}  // namespace stoker
