// codecs/resample_taps.h — Pillow's resample arithmetic, one output pixel at a
// time, written once for the CPU and for CUDA kernels.
//
// resample.cc's tables (PlanResampleAxis) are built from these functions, and
// the GPU decoder's kernels (device/gpu_kernels.cu) call the same ones per
// output pixel, so a resize on the GPU gives the CPU path's integers from the
// same decoded pixels: Pillow's weights in double, normalized per output,
// 22-bit fixed point rounded half away from zero, a horizontal pass rounded
// to uint8 and then a vertical pass. The kernels are built with
// --fmad=false so no multiply-add is fused where the host rounds twice.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define STOKER_HD __host__ __device__ __forceinline__
#else
#define STOKER_HD inline
#endif

namespace stoker::taps {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

enum Filter : int { kBilinear = 0, kBicubic = 1 };

STOKER_HD double FilterAt(int filter, double x) {
  if (x < 0.0) x = -x;
  if (filter == kBicubic) {
    constexpr double a = -0.5;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
  }
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

STOKER_HD uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One axis of a resize of the source interval [in0, in1) onto out_size
// pixels over in_size source pixels.
struct Axis {
  int filter = kBilinear;
  int in_size = 0;
  float in0 = 0;  // Pillow takes the box as C floats
  double scale = 0, filterscale = 1, support = 1;
  int ksize = 0;
  bool identity = false;  // the source copied unchanged (Pillow skips the pass)
};

STOKER_HD Axis MakeAxis(int filter, int in_size, double in0_d, double in1_d, int out_size) {
  Axis a;
  const float in0 = static_cast<float>(in0_d), in1 = static_cast<float>(in1_d);
  a.filter = filter;
  a.in_size = in_size;
  a.in0 = in0;
  a.scale = static_cast<double>(in1 - in0) / out_size;
  a.filterscale = a.scale < 1.0 ? 1.0 : a.scale;
  a.support = (filter == kBicubic ? 2.0 : 1.0) * a.filterscale;
  const double s = a.support;
  const int whole = static_cast<int>(s);
  a.ksize = (whole + (s > whole ? 1 : 0)) * 2 + 1;  // ceil(support) * 2 + 1
  a.identity = out_size == in_size && in0 == 0.0f && in1 == static_cast<float>(out_size);
  return a;
}

// Output `xx`'s taps: the first source pixel, how many, the weights' sum
// (for Weight) and the filter's centre.
struct Window {
  int first = 0, count = 0;
  double center = 0, sum = 0;
};

STOKER_HD Window WindowOf(const Axis& a, int xx) {
  Window w;
  if (a.identity) {
    w.first = xx;
    w.count = 1;
    w.sum = 1.0;
    return w;
  }
  w.center = a.in0 + (xx + 0.5) * a.scale;
  const double ss = 1.0 / a.filterscale;
  int xmin = static_cast<int>(w.center - a.support + 0.5);
  if (xmin < 0) xmin = 0;
  int xmax = static_cast<int>(w.center + a.support + 0.5);
  if (xmax > a.in_size) xmax = a.in_size;
  xmax -= xmin;
  for (int x = 0; x < xmax; ++x) w.sum += FilterAt(a.filter, (x + xmin - w.center + 0.5) * ss);
  w.first = xmin;
  w.count = xmax > 0 ? xmax : 0;
  return w;
}

// Tap x (0 <= x < w.count) of output window w, in fixed point.
STOKER_HD int32_t Weight(const Axis& a, const Window& w, int x) {
  if (a.identity) return 1 << kPrecisionBits;
  double k = FilterAt(a.filter, (x + w.first - w.center + 0.5) * (1.0 / a.filterscale));
  if (w.sum != 0.0) k /= w.sum;
  return k < 0 ? static_cast<int32_t>(-0.5 + k * (1 << kPrecisionBits))
               : static_cast<int32_t>(0.5 + k * (1 << kPrecisionBits));
}

// The three channels of one output of a pass over HWC RGB: `src` is the
// first tap's R, `step` bytes between taps (3 along a row, the row stride
// down a column).
STOKER_HD void TapRgb(const Axis& a, const Window& w, const uint8_t* src, long step, uint8_t out[3]) {
  int32_t r = kHalf, g = kHalf, b = kHalf;
  for (int x = 0; x < w.count; ++x) {
    const int32_t k = Weight(a, w, x);
    const uint8_t* p = src + x * step;
    r += static_cast<int32_t>(p[0]) * k;
    g += static_cast<int32_t>(p[1]) * k;
    b += static_cast<int32_t>(p[2]) * k;
  }
  out[0] = Clip8(r);
  out[1] = Clip8(g);
  out[2] = Clip8(b);
}

}  // namespace stoker::taps
