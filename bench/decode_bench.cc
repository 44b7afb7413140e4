// bench/decode_bench.cc — single-thread JPEG decode(+resize) rates, side by side.
//
// Build (after building the codecs layer in build/codecs), from the repo root:
//   g++ -std=c++20 -O2 -Iinclude -Isrc bench/decode_bench.cc build/codecs/libstoker_codecs.a build/codecs/libstoker_core.a -lturbojpeg -ljpeg -lyuv -lpthread -o build/codecs/decode_bench
// Run: build/codecs/decode_bench [num_images=500] [reps=5] [wall|cpu]
//
// Workload V of /work/shared/BENCHMARKS.md: synthetic ImageNet-like 500x375
// q90 4:2:0 JPEGs (smooth gradients + shapes + mild noise, ~40-60 KB), made
// in memory with fixed seeds; workload S's image side: num_images/10 such
// JPEGs at 1500x1000. Measured on one thread, every row once per repetition
// in turn (A B C ... A B C ...), a warm-up pass first, median of `reps`
// (min-max shown):
//   A  TurboJPEG tjDecompress2 full-size RGB, decode only (the ceiling)
//   B  stoker JpegDecoder::DecodeInto 224x224 center crop, uint8 CHW
//   C  stoker DecodeInto random_resized_crop + flip, float32 normalized CHW
//   E  stoker DecodeInto random_resized_crop 224, uint8 CHW
//   D  TurboJPEG tjDecompressToYUV2, full size: the floor of the full-plane path
//   S* the same for 1500x1000: TurboJPEG RGB decode, stoker longest side
//      1024 + pad, uint8 CHW
// B, C, E and S run twice: region decode (the default: IDCT only on the
// crop's iMCU rows/columns) and "full-plane" (SetRegionDecode(false): the
// TurboJPEG path that decodes whole planes, then crops), the before/after of
// the region path in one run. Prints PASS/MISS for B/A against the 1.15x
// target; never fails.
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
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

// Wall clock by default; "cpu" as the third argument times this thread's CPU
// time instead (CLOCK_THREAD_CPUTIME_ID), which other processes competing for
// the cores barely move: on a shared, loaded machine it is the steadier figure.
bool g_cpu_clock = false;
double Now() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  g_cpu_clock = argc > 3 && std::string(argv[3]) == "cpu";
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

  // Workload S's images: fewer, 9x the pixels.
  const int SW = 1500, SH = 1000, sn = std::max(1, n / 10);
  std::vector<std::vector<uint8_t>> big;
  size_t big_bytes = 0;
  for (int i = 0; i < sn; ++i) {
    auto img = SyntheticImage(SW, SH, 5000 + i);
    auto enc = stoker::EncodeJpeg(img.data(), SW, SH, 3, 90, 420);
    if (!enc.ok()) { std::fprintf(stderr, "%s\n", enc.status().ToString().c_str()); return 1; }
    big_bytes += enc->size();
    big.push_back(std::move(enc).value());
  }
  std::printf("%d JPEGs %dx%d q90 4:2:0, mean %.1f KB; clock: %s\n", sn, SW, SH, big_bytes / 1024.0 / sn,
              g_cpu_clock ? "thread CPU time" : "wall");

  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> rgb(static_cast<size_t>(SW) * SH * 3);
  auto run_tj = [&](const std::vector<std::vector<uint8_t>>& set, int w, int h) {
    const double t0 = Now();
    for (const auto& j : set) {
      if (tjDecompress2(tj, j.data(), j.size(), rgb.data(), w, 0, h, TJPF_RGB, 0) != 0) std::abort();
    }
    return set.size() / (Now() - t0);
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
  stoker::ImageSpec rrc_u8;
  rrc_u8.mode = stoker::ResizeMode::kRandomResizedCrop;
  stoker::ImageSpec sam;  // SAM-style: longest side 1024, zero pad
  sam.mode = stoker::ResizeMode::kLongestPad;
  sam.width = sam.height = 1024;
  std::vector<uint8_t> out(std::max({center.OutputBytes(), rrc.OutputBytes(), sam.OutputBytes()}));
  auto run_stoker = [&](const std::vector<std::vector<uint8_t>>& set, const stoker::ImageSpec& spec, bool region) {
    dec.SetRegionDecode(region);
    const double t0 = Now();
    uint64_t seed = 0;
    for (const auto& j : set) {
      auto st = dec.DecodeInto(j, spec, seed++, std::span<uint8_t>(out.data(), spec.OutputBytes()));
      if (!st.ok()) { std::fprintf(stderr, "%s\n", st.ToString().c_str()); std::abort(); }
    }
    return set.size() / (Now() - t0);
  };

  struct Row {
    const char* name;
    std::function<double()> run;
    std::vector<double> v;
  };
  std::vector<Row> rows = {
      {"A  TurboJPEG full RGB decode only", [&] { return run_tj(jpegs, W, H); }, {}},
      {"B  stoker 224 center crop u8 CHW, region", [&] { return run_stoker(jpegs, center, true); }, {}},
      {"B0 stoker 224 center crop u8 CHW, full-plane", [&] { return run_stoker(jpegs, center, false); }, {}},
      {"C  stoker RRC+flip f32 normalized CHW, region", [&] { return run_stoker(jpegs, rrc, true); }, {}},
      {"C0 stoker RRC+flip f32 normalized CHW, full-plane", [&] { return run_stoker(jpegs, rrc, false); }, {}},
      {"E  stoker RRC 224 u8 CHW, region", [&] { return run_stoker(jpegs, rrc_u8, true); }, {}},
      {"E0 stoker RRC 224 u8 CHW, full-plane", [&] { return run_stoker(jpegs, rrc_u8, false); }, {}},
      {"D  TurboJPEG decode to YUV planes only (no resize)", run_yuv, {}},
      {"SA TurboJPEG full RGB decode only, 1500x1000", [&] { return run_tj(big, SW, SH); }, {}},
      {"SB stoker longest 1024 + pad u8 CHW, region", [&] { return run_stoker(big, sam, true); }, {}},
      {"SB0 stoker longest 1024 + pad u8 CHW, full-plane", [&] { return run_stoker(big, sam, false); }, {}},
  };
  for (Row& r : rows) r.run();  // warm-up: caches, scratch buffers
  std::vector<double> ratio, gain_b, gain_c, gain_e, gain_s;
  for (int rep = 0; rep < reps; ++rep) {
    for (Row& r : rows) r.v.push_back(r.run());
    auto last = [&](int i) { return rows[i].v.back(); };
    ratio.push_back(last(1) / last(0));
    gain_b.push_back(last(1) / last(2));
    gain_c.push_back(last(3) / last(4));
    gain_e.push_back(last(5) / last(6));
    gain_s.push_back(last(9) / last(10));
  }
  auto report = [](const std::string& name, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::printf("%-60s median %9.3f  (min %.3f max %.3f)\n", name.c_str(), v[v.size() / 2], v.front(), v.back());
    return v[v.size() / 2];
  };
  for (const Row& r : rows) report(std::string(r.name) + ", img/s", r.v);
  report("B/B0 region vs full-plane, center crop (per repetition)", gain_b);
  report("C/C0 region vs full-plane, RRC f32 (per repetition)", gain_c);
  report("E/E0 region vs full-plane, RRC u8 (per repetition)", gain_e);
  report("SB/SB0 region vs full-plane, 1500x1000 -> 1024 (per repetition)", gain_s);
  const double med = report("B/A ratio (per repetition)", ratio);
  std::printf("target B/A >= 1.15: %s\n", med >= 1.15 ? "PASS" : "MISS");
  tjDestroy(tj);
  return 0;
}
