// tests/cpp/codecs/resample_test.cc — resample.h: evaluating only a window
// of the output gives exactly the full resize's pixels there (what makes
// Resize+CenterCrop cheap and still Pillow's), identity axes copy, and the
// result agrees with an independent double-precision port of Pillow's
// ImagingResample (max |diff| <= 1, on <= 1% of bytes: the port rounds in double, Pillow and
// resample.h in 22-bit fixed point; the Python tests compare with Pillow itself).
#include "codecs/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace stoker {
namespace {

std::vector<uint8_t> Noise(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < v.size(); ++i) {
    const int x = static_cast<int>((i / 3) % w), y = static_cast<int>(i / 3 / w);
    v[i] = static_cast<uint8_t>(std::clamp(128 + 90 * std::sin(x * 0.31 + y * 0.17 + i % 3) +
                                               static_cast<int>(rng() % 41) - 20, 0.0, 255.0));
  }
  return v;
}

std::vector<uint8_t> Resize(Resample f, const std::vector<uint8_t>& src, int w, int h, int ow, int oh, int wx,
                            int wy, int ww, int wh) {
  ResampleAxis ax, ay;
  PlanResampleAxis(f, w, 0, w, ow, wx, ww, &ax);
  PlanResampleAxis(f, h, 0, h, oh, wy, wh, &ay);
  EXPECT_GE(ax.src_lo, 0);
  EXPECT_LE(ax.src_hi, w);
  std::vector<uint8_t> out(static_cast<size_t>(ww) * wh * 3), tmp;
  ResampleRgb(ax, ay, src.data(), static_cast<size_t>(w) * 3, 0, 0, out.data(), static_cast<size_t>(ww) * 3, &tmp);
  return out;
}

// Independent port (double accumulation, round half up) of Pillow's resample.
std::vector<uint8_t> Port(Resample f, const std::vector<uint8_t>& src, int w, int h, int ow, int oh) {
  auto filt = [f](double x) {
    x = std::abs(x);
    if (f == Resample::kBilinear) return x < 1 ? 1 - x : 0.0;
    if (x < 1) return (1.5 * x - 2.5) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * -0.5;
    return 0.0;
  };
  const double support0 = f == Resample::kBilinear ? 1 : 2;
  auto pass = [&](const std::vector<uint8_t>& in, int n_in, int n_out, int lines, bool horizontal) {
    std::vector<uint8_t> out(static_cast<size_t>(n_out) * lines * 3);
    const double scale = double(n_in) / n_out, fs = std::max(1.0, scale), support = support0 * fs;
    for (int o = 0; o < n_out; ++o) {
      const double c = (o + 0.5) * scale;
      const int lo = std::max(0, int(c - support + 0.5)), hi = std::min(n_in, int(c + support + 0.5));
      std::vector<double> k;
      double sum = 0;
      for (int i = lo; i < hi; ++i) sum += k.emplace_back(filt((i - c + 0.5) / fs));
      for (int l = 0; l < lines; ++l) {
        for (int ch = 0; ch < 3; ++ch) {
          double s = 0;
          for (int i = lo; i < hi; ++i) {
            const size_t at = horizontal ? (size_t(l) * n_in + i) * 3 + ch : (size_t(i) * lines + l) * 3 + ch;
            s += k[i - lo] / sum * in[at];
          }
          const size_t to = horizontal ? (size_t(l) * n_out + o) * 3 + ch : (size_t(o) * lines + l) * 3 + ch;
          out[to] = static_cast<uint8_t>(std::clamp(std::floor(s + 0.5), 0.0, 255.0));
        }
      }
    }
    return out;
  };
  std::vector<uint8_t> mid = ow == w ? src : pass(src, w, ow, h, true);
  return oh == h ? mid : pass(mid, h, oh, ow, false);
}

TEST(ResampleTest, WindowEqualsFullResizeThenCrop) {
  for (Resample f : {Resample::kBilinear, Resample::kBicubic}) {
    for (auto [w, h, ow, oh] : {std::array{500, 375, 298, 224}, std::array{375, 500, 256, 341},
                                std::array{61, 40, 224, 147}, std::array{1, 300, 16, 4800}, std::array{97, 97, 97, 50}}) {
      const auto src = Noise(w, h, w * 31 + h);
      const auto full = Resize(f, src, w, h, ow, oh, 0, 0, ow, oh);
      const int ww = std::min(ow, 224), wh = std::min(oh, 224);
      const int wx = (ow - ww) / 2 + (ow - ww) % 2, wy = (oh - wh) / 2;
      const auto win = Resize(f, src, w, h, ow, oh, wx, wy, ww, wh);
      for (int y = 0; y < wh; ++y) {
        for (int x = 0; x < ww * 3; ++x) {
          ASSERT_EQ(win[(size_t(y) * ww) * 3 + x], full[(size_t(y + wy) * ow + wx) * 3 + x])
              << w << "x" << h << "->" << ow << "x" << oh << " at " << x / 3 << "," << y;
        }
      }
    }
  }
}

TEST(ResampleTest, AgreesWithDoublePrecisionPort) {
  for (Resample f : {Resample::kBilinear, Resample::kBicubic}) {
    for (auto [w, h, ow, oh] : {std::array{500, 375, 298, 224}, std::array{131, 97, 400, 33},
                                std::array{64, 64, 64, 20}, std::array{300, 200, 300, 200}}) {
      const auto src = Noise(w, h, w + h);
      const auto got = Resize(f, src, w, h, ow, oh, 0, 0, ow, oh);
      const auto want = Port(f, src, w, h, ow, oh);
      ASSERT_EQ(got.size(), want.size());
      int worst = 0;
      size_t off = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(int(got[i]) - int(want[i]));
        worst = std::max(worst, d);
        off += d != 0;
      }
      EXPECT_LE(worst, 1) << w << "x" << h << "->" << ow << "x" << oh;
      EXPECT_LE(off, got.size() / 100 + 1) << w << "x" << h << "->" << ow << "x" << oh;
      if (w == ow && h == oh) {
        EXPECT_EQ(got, src);  // identity: a copy
      }
    }
  }
}

// The planar pass (rows of R, G, B planes in, planar rows or CHW out; AVX2
// where the CPU has it, the scalar loop below 8 outputs) gives the same bytes
// as ResampleRgb on the interleaved image, over many geometries: down- and
// upscales, windows at the edges, narrow windows, gray (one plane).
struct PlanarRows {
  std::vector<uint8_t> planes;  // per source row: R, G, B planes of `stride` bytes
  size_t stride;
  int x0;
};
const uint8_t* PlanarRow(void* ctx, int y) {
  const PlanarRows& p = *static_cast<PlanarRows*>(ctx);
  return p.planes.data() + static_cast<size_t>(y) * 3 * p.stride;
}

TEST(ResampleTest, PlanarRowsEqualInterleaved) {
  std::mt19937 rng(5);
  int planar_cases = 0, identity_cases = 0;
  for (int t = 0; t < 300; ++t) {
    const Resample f = t % 3 == 0 ? Resample::kBicubic : Resample::kBilinear;
    const int w = 8 + static_cast<int>(rng() % 600), h = 4 + static_cast<int>(rng() % 60);
    const int ow = 1 + static_cast<int>(rng() % (t % 4 == 0 ? 2 * w : w));
    const int oh = t % 10 == 5 ? h : 1 + static_cast<int>(rng() % (2 * h));  // every 10th: vertical identity
    const int ww = 1 + static_cast<int>(rng() % ow), wh = 1 + static_cast<int>(rng() % oh);
    const int wx = static_cast<int>(rng() % (ow - ww + 1)), wy = static_cast<int>(rng() % (oh - wh + 1));
    const bool gray = t % 7 == 0;
    auto src = Noise(w, h, t);
    if (gray) {
      for (size_t i = 0; i < src.size(); i += 3) src[i + 1] = src[i + 2] = src[i];
    }
    ResampleAxis ax, ay;
    PlanResampleAxis(f, w, 0, w, ow, wx, ww, &ax);
    PlanResampleAxis(f, h, 0, h, oh, wy, wh, &ay);
    if (!ax.planar) continue;
    ++planar_cases;
    identity_cases += ay.identity;
    std::vector<uint8_t> want(static_cast<size_t>(ww) * wh * 3), tmp;
    ResampleRgb(ax, ay, src.data(), static_cast<size_t>(w) * 3, 0, 0, want.data(), static_cast<size_t>(ww) * 3, &tmp);
    // Planar rows of pixels [src_lo, src_hi), with the slack the pass may read.
    PlanarRows rows;
    rows.stride = static_cast<size_t>(ax.src_hi - ax.src_lo) + ResampleRowSlack(ax);
    rows.planes.assign(3 * rows.stride * h, 0xEE);
    for (int y = 0; y < h; ++y) {
      for (int c = 0; c < 3; ++c) {
        for (int x = ax.src_lo; x < ax.src_hi; ++x) {
          rows.planes[(static_cast<size_t>(y) * 3 + c) * rows.stride + (x - ax.src_lo)] =
              src[(static_cast<size_t>(y) * w + x) * 3 + c];
        }
      }
    }
    // CHW output.
    std::vector<uint8_t> chw(static_cast<size_t>(ww) * wh * 3, 0x5A), tmp2;
    ResampleRgbPlanarRows(ax, ay, PlanarRow, &rows, rows.stride, chw.data(), static_cast<size_t>(ww),
                          static_cast<size_t>(ww) * wh, &tmp2);
    for (int y = 0; y < wh; ++y) {
      for (int x = 0; x < ww; ++x) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(chw[(static_cast<size_t>(c) * wh + y) * ww + x], want[(static_cast<size_t>(y) * ww + x) * 3 + c])
              << "case " << t << " " << w << "x" << h << " -> " << ow << "x" << oh << " window " << wx << "," << wy
              << " " << ww << "x" << wh << " at (" << x << "," << y << ") channel " << c;
        }
      }
    }
    if (gray) {  // one plane given three times (stride 0): the same bytes
      std::vector<uint8_t> g(chw.size(), 0x5A);
      ResampleRgbPlanarRows(ax, ay, PlanarRow, &rows, 0, g.data(), static_cast<size_t>(ww),
                            static_cast<size_t>(ww) * wh, &tmp2);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], chw[i % (static_cast<size_t>(ww) * wh)]) << "gray case " << t;
    }
  }
  EXPECT_GT(planar_cases, 100);
  EXPECT_GT(identity_cases, 10);
}

TEST(ResampleTest, ChooseDenomKeepsHeadroom) {
  SampleGeometry g;
  g.crop_w = 2000, g.crop_h = 1500, g.resized_w = 298, g.resized_h = 224;
  EXPECT_EQ(ChooseResampleDenom(g), 1);  // 1500/2 = 750 < 4 * 224
  g.resized_w = 120, g.resized_h = 90;   // 1500/4 = 375 >= 4 * 90, 2000/8 < 4 * 120
  EXPECT_EQ(ChooseResampleDenom(g), 4);
  g.resized_w = 200, g.resized_h = 150;  // 1500/2 = 750 >= 4 * 150, 2000/4 < 4 * 200
  EXPECT_EQ(ChooseResampleDenom(g), 2);
  g.crop_w = 500, g.crop_h = 375, g.resized_w = 298, g.resized_h = 224;
  EXPECT_EQ(ChooseResampleDenom(g), 1);
}

}  // namespace
}  // namespace stoker
