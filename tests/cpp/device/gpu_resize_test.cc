// tests/cpp/device/gpu_resize_test.cc — the GPU kernels' per-pixel
// arithmetic (device/gpu_resize.h, built here for the host) gives the CPU
// path's bytes from the same decoded pixels: codecs/rgb_window.h's
// FullRgbToOutput, the Pillow-exact resample the PNG/WebP decoders use and
// the JPEG paths match at full scale. Every resize mode, filter, layout,
// dtype, flip and many random crops, compared byte for byte.
#include "device/gpu_resize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codecs/decode_scratch.h"
#include "codecs/rgb_window.h"
#include "codecs/sample_geometry.h"
#include "device/image_job_plan.h"

namespace stoker {
namespace {

std::vector<uint8_t> Image(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < v.size(); ++i) {
    const int x = static_cast<int>((i / 3) % w), y = static_cast<int>(i / 3 / w);
    v[i] = static_cast<uint8_t>(std::clamp(128 + 100 * std::sin(x * 0.21 + y * 0.13 + static_cast<double>(i % 3)) +
                                               static_cast<int>(rng() % 31) - 15, 0.0, 255.0));
  }
  return v;
}

// The stand-in decoder's two passes over full-size RGB.
std::vector<uint8_t> TwoPasses(const std::vector<uint8_t>& rgb, int w, int h, const ImageSpec& spec, uint64_t seed) {
  Result<SampleGeometry> g = PlanSample(spec, w, h, seed);
  EXPECT_TRUE(g.ok());
  const ImageJob j = JobOf(*g, w, h);
  std::vector<uint8_t> out(spec.OutputBytes(), 0xAB), tmp;  // not zero: padding must be written
  gpu_resize::BothPassesOnHost(rgb.data(), static_cast<long>(w) * 3, j, OutputSpecOf(spec), &tmp, out.data());
  return out;
}

std::vector<uint8_t> CpuPath(const std::vector<uint8_t>& rgb, int w, int h, const ImageSpec& spec, uint64_t seed) {
  DecodeScratch scratch;
  std::vector<uint8_t> out(spec.OutputBytes());
  Status st = FullRgbToOutput(rgb.data(), w, h, spec, seed, scratch, out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(GpuResizeTest, EqualsTheCpuPathByteForByte) {
  const struct {
    int w, h;
  } sizes[] = {{500, 375}, {375, 500}, {224, 224}, {900, 600}, {97, 61}};
  int compared = 0;
  for (const auto& size : sizes) {
    const std::vector<uint8_t> rgb = Image(size.w, size.h, static_cast<uint32_t>(size.w * 31 + size.h));
    for (ResizeMode mode : {ResizeMode::kRandomResizedCrop, ResizeMode::kShorterCenterCrop, ResizeMode::kLongestPad,
                            ResizeMode::kStretch}) {
      for (Resample filter : {Resample::kBilinear, Resample::kBicubic}) {
        for (int variant = 0; variant < 4; ++variant) {
          ImageSpec spec;
          spec.mode = mode;
          spec.resample = filter;
          spec.height = spec.width = mode == ResizeMode::kLongestPad ? 256 : 224;
          if (mode == ResizeMode::kStretch) spec.height = 160;
          spec.random_hflip = true;
          spec.chw = variant % 2 == 0;
          spec.pixel = variant >= 2 ? PixelType::kFloat32 : PixelType::kUint8;
          spec.normalize = variant == 3;
          if (mode == ResizeMode::kShorterCenterCrop && variant == 1) spec.resize_to = 256;
          for (uint64_t seed = 1; seed <= 3; ++seed) {
            const std::vector<uint8_t> gpu = TwoPasses(rgb, size.w, size.h, spec, seed);
            const std::vector<uint8_t> cpu = CpuPath(rgb, size.w, size.h, spec, seed);
            ASSERT_EQ(gpu.size(), cpu.size());
            ASSERT_EQ(std::memcmp(gpu.data(), cpu.data(), gpu.size()), 0)
                << size.w << "x" << size.h << " mode " << static_cast<int>(mode) << " filter "
                << static_cast<int>(filter) << " variant " << variant << " seed " << seed;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 5 * 4 * 2 * 4 * 3);
}

TEST(GpuResizeTest, NoneModeCopiesThePixels) {
  const std::vector<uint8_t> rgb = Image(64, 48, 7);
  ImageSpec spec;
  spec.mode = ResizeMode::kNone;
  spec.width = 64;
  spec.height = 48;
  spec.chw = false;
  EXPECT_EQ(TwoPasses(rgb, 64, 48, spec, 1), rgb);
}

}  // namespace
}  // namespace stoker
