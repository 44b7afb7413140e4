// bench/decode_bench.cc — single-thread JPEG decode(+resize) rates, side by side.
//
// Build (after building the codecs layer in build/codecs), from the repo root:
//   g++ -std=c++20 -O2 -Iinclude -Isrc bench/decode_bench.cc build/codecs/libstoker_codecs.a build/codecs/libstoker_core.a -lturbojpeg -lyuv -lpthread -o build/codecs/decode_bench
// Run: build/codecs/decode_bench [num_images=500] [reps=5]
//
// Workload V of /work/shared/BENCHMARKS.md: synthetic ImageNet-like 500x375
// q90 4:2:0 JPEGs (smooth gradients + shapes + mild noise, ~40-60 KB), made
// in memory with fixed seeds. Measured on one thread, alternating A B A B, a
// warm-up pass first, median of `reps` (min-max shown):
//   A  TurboJPEG tjDecompress2 full-size RGB, decode only (the ceiling)
//   B  stoker JpegDecoder::DecodeInto 224x224 center crop, uint8 CHW
//   C  stoker DecodeInto random_resized_crop + flip, float32 normalized CHW
//   D  TurboJPEG tjDecompressToYUV2, full size: the floor of stoker's path
// and the ratio B/A. Prints PASS/MISS against the 1.15x target; never fails.
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "codecs/jpeg.h"

namespace {

std::vector<uint8_t> SyntheticImage(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 6.0f);
  std::vector<uint8_t> img(static_cast<size_t>(w) * h * 3);
  float base[3], gx[3], gy[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = 40 + 150 * u(rng);
    gx[c] = (u(rng) - 0.5f) * 120 / w;
    gy[c] = (u(rng) - 0.5f) * 120 / h;
  }
  struct Disk { float x, y, r, col[3], freq; };
  std::vector<Disk> disks(12);
  for (auto& d : disks) {
    d.x = u(rng) * w; d.y = u(rng) * h; d.r = 15 + u(rng) * 90; d.freq = 0.02f + 0.1f * u(rng);
    for (float& c : d.col) c = u(rng) * 255;
  }
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float px[3];
      for (int c = 0; c < 3; ++c) px[c] = base[c] + gx[c] * x + gy[c] * y + 20 * std::sin(0.03f * x + c) * std::cos(0.04f * y);
      for (const auto& d : disks) {
        const float dx = x - d.x, dy = y - d.y, dist = std::sqrt(dx * dx + dy * dy);
        if (dist < d.r) {
          const float tex = 25 * std::sin(d.freq * (x + 2 * y));
          for (int c = 0; c < 3; ++c) px[c] = 0.3f * px[c] + 0.7f * d.col[c] + tex;
        }
      }
      for (int c = 0; c < 3; ++c) {
        img[(static_cast<size_t>(y) * w + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(px[c] + noise(rng), 0.0f, 255.0f));
      }
    }
  }
  return img;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int W = 500, H = 375;
  std::vector<std::vector<uint8_t>> jpegs;
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    // A handful of distinct scenes, re-noised, keeps generation fast.
    auto img = SyntheticImage(W, H, 1000 + i);
    auto enc = stoker::EncodeJpeg(img.data(), W, H, 3, 90, 420);
    if (!enc.ok()) { std::fprintf(stderr, "%s\n", enc.status().ToString().c_str()); return 1; }
    bytes += enc->size();
    jpegs.push_back(std::move(enc).value());
  }
  std::printf("%d JPEGs %dx%d q90 4:2:0, mean %.1f KB\n", n, W, H, bytes / 1024.0 / n);

  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> rgb(static_cast<size_t>(W) * H * 3);
  auto run_tj = [&] {
    const double t0 = Now();
    for (const auto& j : jpegs) {
      if (tjDecompress2(tj, j.data(), j.size(), rgb.data(), W, 0, H, TJPF_RGB, 0) != 0) std::abort();
    }
    return n / (Now() - t0);
  };
  std::vector<uint8_t> yuv(static_cast<size_t>(W) * H * 2);
  auto run_yuv = [&] {
    const double t0 = Now();
    for (const auto& j : jpegs) {
      if (tjDecompressToYUV2(tj, j.data(), j.size(), yuv.data(), W, 1, H, 0) != 0) std::abort();
    }
    return n / (Now() - t0);
  };
  stoker::JpegDecoder dec;
  stoker::ImageSpec center;  // 224x224 center crop, uint8 CHW
  stoker::ImageSpec rrc;
  rrc.mode = stoker::ResizeMode::kRandomResizedCrop;
  rrc.random_hflip = true;
  rrc.pixel = stoker::PixelType::kFloat32;
  rrc.normalize = true;
  std::vector<uint8_t> out_u8(center.OutputBytes());
  std::vector<float> out_f32(rrc.OutputBytes() / 4);
  auto run_stoker = [&](const stoker::ImageSpec& spec, uint8_t* out, size_t size) {
    const double t0 = Now();
    uint64_t seed = 0;
    for (const auto& j : jpegs) {
      auto st = dec.DecodeInto(j, spec, seed++, std::span<uint8_t>(out, size));
      if (!st.ok()) { std::fprintf(stderr, "%s\n", st.ToString().c_str()); std::abort(); }
    }
    return n / (Now() - t0);
  };
  auto run_center = [&] { return run_stoker(center, out_u8.data(), out_u8.size()); };
  auto run_rrc = [&] {
    return run_stoker(rrc, reinterpret_cast<uint8_t*>(out_f32.data()), rrc.OutputBytes());
  };

  run_tj(); run_center(); run_rrc();  // warm-up: caches, scratch buffers
  std::vector<double> a, b, c, d, ratio;
  for (int r = 0; r < reps; ++r) {
    a.push_back(run_tj());
    b.push_back(run_center());
    c.push_back(run_rrc());
    d.push_back(run_yuv());
    ratio.push_back(b.back() / a.back());
  }
  auto report = [](const char* name, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::printf("%-58s median %9.3f  (min %.3f max %.3f)\n", name, v[v.size() / 2], v.front(), v.back());
    return v[v.size() / 2];
  };
  report("A TurboJPEG full RGB decode only, img/s", a);
  report("B stoker DecodeInto 224 center crop u8 CHW, img/s", b);
  report("C stoker DecodeInto RRC+flip f32 normalized CHW, img/s", c);
  report("D TurboJPEG decode to YUV planes only (no resize), img/s", d);
  const double med = report("B/A ratio (per repetition)", ratio);
  std::printf("target B/A >= 1.15: %s\n", med >= 1.15 ? "PASS" : "MISS");
  tjDestroy(tj);
  return 0;
}
