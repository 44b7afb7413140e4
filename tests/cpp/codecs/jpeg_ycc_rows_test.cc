// Tests for codecs/jpeg_ycc_rows.h and jpeg_raw_resample.h: RGB rows made
// from raw planes (our fancy upsampling and YCbCr->RGB) against libjpeg's own
// full RGB decode (TurboJPEG tjDecompress2: jpeg_read_scanlines, fancy
// upsampling, ISLOW, its SIMD) over many rectangles: random, odd-sized, at
// every image edge, whole images; 4:2:0, 4:2:2, 4:4:4, 4:4:0, gray,
// progressive, restart markers; smooth images and harsh ones (saturated
// colors with sharp edges, which push the conversion into its clamps). The
// scalar and AVX2 loops, interleaved rows and planar ones, must all give
// libjpeg's bytes. STOKER_JPEG_DIR (optional):
// a directory of real JPEGs (*.jpg, *.JPEG) checked the same way.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdio>  // before jpeglib.h (FILE)
#include <jpeglib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codecs/decode_scratch.h"
#include "codecs/jpeg.h"
#include "codecs/jpeg_raw_resample.h"
#include "codecs/jpeg_raw_region.h"
#include "codecs/jpeg_ycc_rows.h"
#include "codecs/libjpeg_decompressor.h"
#include "codecs/libjpeg_encode.h"

namespace stoker {
namespace {

// Smooth gradients and waves, or (harsh) saturated random blocks with sharp
// edges and noise.
std::vector<uint8_t> TestImage(int w, int h, int channels, bool harsh, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), cell(3, 19);
  std::normal_distribution<double> noise(0, harsh ? 20 : 2);
  std::vector<uint8_t> img(static_cast<size_t>(w) * h * channels);
  const int cw = cell(rng), ch = cell(rng);
  std::vector<int> colors(static_cast<size_t>((w / cw + 2) * (h / ch + 2) * channels));
  for (int& c : colors) c = byte(rng) < 128 ? (byte(rng) < 128 ? 0 : 255) : byte(rng);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        double v;
        if (harsh) {
          v = colors[(static_cast<size_t>(y / ch) * (w / cw + 2) + x / cw) * channels + c];
        } else {
          v = 128 + 70 * std::sin(0.05 * x + c) * std::cos(0.07 * y - c) + 0.1 * x;
        }
        img[(static_cast<size_t>(y) * w + x) * channels + c] = static_cast<uint8_t>(std::clamp(v + noise(rng), 0.0, 255.0));
      }
    }
  }
  return img;
}

std::vector<uint8_t> EncodeLibjpeg(int w, int h, int channels, int h_samp, int v_samp, bool progressive,
                                   int restart_rows, bool harsh, uint32_t seed) {
  return test_data::EncodeWithLibjpeg(TestImage(w, h, channels, harsh, seed), w, h, channels,
                                      {h_samp, v_samp, progressive, restart_rows, harsh ? 75 : 92});
}

// The reference: libjpeg-turbo's whole-image RGB decode, as Pillow does it.
// Empty for a JPEG it does not decode to RGB (CMYK, a layout TurboJPEG
// cannot name): those are outside the raw path and skipped.
std::vector<uint8_t> LibjpegRgb(const std::vector<uint8_t>& jpeg, int* w, int* h) {
  tjhandle t = tjInitDecompress();
  int ss, cs;
  std::vector<uint8_t> rgb;
  if (tjDecompressHeader3(t, jpeg.data(), jpeg.size(), w, h, &ss, &cs) == 0 && cs != TJCS_CMYK && cs != TJCS_YCCK) {
    rgb.resize(static_cast<size_t>(*w) * *h * 3);
    EXPECT_EQ(tjDecompress2(t, jpeg.data(), jpeg.size(), rgb.data(), *w, 0, *h, TJPF_RGB, 0), 0) << tjGetErrorStr2(t);
  }
  tjDestroy(t);
  return rgb;
}

struct File {
  std::string what;
  std::vector<uint8_t> jpeg;
  bool must_handle;  // a layout the raw path takes
};

std::vector<File> Files() {
  std::vector<File> files;
  const std::pair<int, int> sizes[] = {{500, 375}, {375, 500}, {37, 23}, {9, 17}, {6, 5}, {129, 65}, {333, 251},
                                       {1, 40}, {2, 2}, {3, 301}, {64, 48}};
  int seed = 1;
  for (bool harsh : {false, true}) {
    for (auto [w, h] : sizes) {
      const std::string tag = (harsh ? "harsh " : "smooth ") + std::to_string(w) + "x" + std::to_string(h);
      files.push_back({"420 " + tag, EncodeLibjpeg(w, h, 3, 2, 2, false, 0, harsh, seed++), (w + 1) / 2 > 2});
      files.push_back({"422 " + tag, EncodeLibjpeg(w, h, 3, 2, 1, false, 0, harsh, seed++), (w + 1) / 2 > 2});
      files.push_back({"444 " + tag, EncodeLibjpeg(w, h, 3, 1, 1, false, 0, harsh, seed++), true});
      files.push_back({"440 " + tag, EncodeLibjpeg(w, h, 3, 1, 2, false, 0, harsh, seed++), true});
      files.push_back({"gray " + tag, EncodeLibjpeg(w, h, 1, 1, 1, false, 0, harsh, seed++), true});
      files.push_back({"420 progressive " + tag, EncodeLibjpeg(w, h, 3, 2, 2, true, 0, harsh, seed++), (w + 1) / 2 > 2});
      files.push_back({"422 restart " + tag, EncodeLibjpeg(w, h, 3, 2, 1, false, 1, harsh, seed++), (w + 1) / 2 > 2});
    }
  }
  if (const char* dir = std::getenv("STOKER_JPEG_DIR")) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".jpg" && ext != ".JPEG" && ext != ".jpeg") continue;
      std::ifstream f(e.path(), std::ios::binary);
      files.push_back({e.path().string(), std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {}), false});
      if (files.size() > 400) break;
    }
  }
  return files;
}

TEST(JpegYccRowsTest, RawRgbRectEqualsLibjpeg) {
  LibJpeg lj;
  DecodeScratch scratch;
  std::mt19937 rng(42);
  int compared = 0, handled_files = 0;
  for (const File& f : Files()) {
    int w = 0, h = 0;
    const std::vector<uint8_t> want = LibjpegRgb(f.jpeg, &w, &h);
    if (want.empty()) {
      ASSERT_FALSE(f.must_handle) << f.what;
      continue;
    }
    // Whole image, each edge strip, corners, single pixels, then random.
    std::vector<std::array<int, 4>> rects = {{0, w, 0, h}, {0, 1, 0, h}, {w - 1, w, 0, h}, {0, w, 0, 1},
                                             {0, w, h - 1, h}, {w - 1, w, h - 1, h}, {0, 1, 0, 1}};
    for (int i = 0; i < 40; ++i) {
      std::uniform_int_distribution<int> ux(0, w - 1), uy(0, h - 1);
      int a = ux(rng), b = ux(rng), c = uy(rng), d = uy(rng);
      rects.push_back({std::min(a, b), std::max(a, b) + 1, std::min(c, d), std::max(c, d) + 1});
    }
    bool handled = false;
    for (const auto& r : rects) {
      const int x0 = r[0], x1 = r[1], y0 = r[2], y1 = r[3];
      std::vector<uint8_t> got(static_cast<size_t>(x1 - x0) * (y1 - y0) * 3);
      for (int variant = 0; variant < 4; ++variant) {
        const bool simd = variant & 1, planes = variant & 2;
        std::fill(got.begin(), got.end(), 0xA5);
        auto done = DecodeRawRgbRect(lj, scratch, f.jpeg, x0, x1, y0, y1, simd, planes, got.data());
        ASSERT_TRUE(done.ok()) << f.what << ": " << done.status().ToString();
        if (!*done) {
          ASSERT_FALSE(f.must_handle && RawRegionSupported()) << f.what << " was not handled";
          continue;
        }
        handled = true;
        for (int y = y0; y < y1; ++y) {
          const uint8_t* g = got.data() + static_cast<size_t>(y - y0) * (x1 - x0) * 3;
          const uint8_t* e = want.data() + (static_cast<size_t>(y) * w + x0) * 3;
          for (int i = 0; i < (x1 - x0) * 3; ++i) {
            ASSERT_EQ(g[i], e[i]) << f.what << " rect x[" << x0 << "," << x1 << ") y[" << y0 << "," << y1
                                  << ") simd " << simd << " planes " << planes << ": pixel (" << x0 + i / 3 << "," << y << ") channel "
                                  << i % 3;
          }
        }
        ++compared;
      }
    }
    handled_files += handled;
  }
  std::printf("  %d rectangles (%d files) identical to libjpeg's RGB decode\n", compared, handled_files);
  if (RawRegionSupported()) {
    EXPECT_GT(handled_files, 100);
  }
}

// Every (y, cb, cr): the AVX2 conversions (interleaved and planar) equal the
// scalar ones (jdcolor.c's tables), and those equal the conversion computed
// here from the table formulas in 64-bit.
TEST(JpegYccRowsTest, ColorConversionSimdEqualsScalarEverywhere) {
  constexpr int n = 256 * 256;
  std::vector<uint8_t> y(n), cb(n), cr(n), a(3 * n), b(3 * n);
  for (int yy = 0; yy < 256; ++yy) {
    for (int i = 0; i < n; ++i) {
      y[i] = static_cast<uint8_t>(yy);
      cb[i] = static_cast<uint8_t>(i & 255);
      cr[i] = static_cast<uint8_t>(i >> 8);
    }
    YccToRgbRow(y.data(), cb.data(), cr.data(), n, a.data(), true);
    YccToRgbRow(y.data(), cb.data(), cr.data(), n, b.data(), false);
    ASSERT_EQ(a, b) << "y " << yy;
    for (bool simd : {true, false}) {
      std::vector<uint8_t> pr(n), pg(n), pb(n);
      YccToRgbPlanes(y.data(), cb.data(), cr.data(), n, pr.data(), pg.data(), pb.data(), simd);
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(pr[i] == b[3 * i] && pg[i] == b[3 * i + 1] && pb[i] == b[3 * i + 2]) << "planes, simd " << simd;
      }
    }
    for (int i = 0; i < n; i += 97) {
      const int64_t x = cb[i] - 128, z = cr[i] - 128;
      auto lim = [](int64_t v) { return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255)); };
      ASSERT_EQ(b[3 * i], lim(yy + ((91881 * z + 32768) >> 16)));
      ASSERT_EQ(b[3 * i + 1], lim(yy + ((-22554 * x - 46802 * z + 32768) >> 16)));
      ASSERT_EQ(b[3 * i + 2], lim(yy + ((116130 * x + 32768) >> 16)));
    }
  }
}

}  // namespace
}  // namespace stoker
