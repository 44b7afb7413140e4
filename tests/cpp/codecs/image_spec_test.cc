// tests/cpp/codecs/image_spec_test.cc — ImageSpec parsing/validation and the
// crop/flip planner (no JPEG needed).
#include <gtest/gtest.h>

#include <cmath>

#include "stoker/image_spec.h"
#include "codecs/sample_geometry.h"

namespace stoker {
namespace {

TEST(ImageSpecTest, ParseAndShape) {
  EXPECT_EQ(*ParseResizeMode("center_crop"), ResizeMode::kShorterCenterCrop);
  EXPECT_EQ(*ParseResizeMode("random_resized_crop"), ResizeMode::kRandomResizedCrop);
  EXPECT_EQ(*ParseResizeMode("longest"), ResizeMode::kLongestPad);
  EXPECT_EQ(ParseResizeMode("bogus").status().code(), StatusCode::kInvalidArgument);
  ImageSpec s;
  EXPECT_EQ(s.OutputShape(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(s.OutputBytes(), 224u * 224 * 3);
  s.chw = false;
  s.pixel = PixelType::kFloat32;
  EXPECT_EQ(s.OutputShape(), (std::vector<int64_t>{224, 224, 3}));
  EXPECT_EQ(s.OutputBytes(), 224u * 224 * 3 * 4);
  EXPECT_TRUE(s.Validate().ok());
}

TEST(ImageSpecTest, ValidateRejects) {
  ImageSpec s;
  s.normalize = true;  // uint8
  EXPECT_FALSE(s.Validate().ok());
  s = ImageSpec{};
  s.height = 0;
  EXPECT_FALSE(s.Validate().ok());
  s = ImageSpec{};
  s.mode = ResizeMode::kRandomResizedCrop;
  s.scale = {0.5f, 0.1f};
  EXPECT_FALSE(s.Validate().ok());
  s.scale = {0.1f, 0.5f};
  s.ratio = {0.0f, 1.0f};
  EXPECT_FALSE(s.Validate().ok());
  s = ImageSpec{};
  s.resize_to = 200;  // smaller than the 224 crop
  EXPECT_FALSE(s.Validate().ok());
  s.resize_to = 256;
  EXPECT_TRUE(s.Validate().ok());
  s.mode = ResizeMode::kStretch;  // center_crop only
  EXPECT_FALSE(s.Validate().ok());
  EXPECT_TRUE(ParseResample("bicubic").ok());
  EXPECT_FALSE(ParseResample("lanczos").ok());
}

TEST(SampleGeometryTest, CenterCropAndLongest) {
  ImageSpec s;
  // torchvision Resize(224) + CenterCrop(224): 500x375 -> 298x224, window
  // left round(37.0) = 37; the whole image is the resize's source.
  auto g = PlanSample(s, 500, 375, 0);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->crop_w, 500);
  EXPECT_EQ(g->resized_w, 298);
  EXPECT_EQ(g->resized_h, 224);
  EXPECT_EQ(g->win_x, 37);
  EXPECT_EQ(g->win_y, 0);
  EXPECT_EQ(g->win_w, 224);
  // Resize(256) + CenterCrop(224): 341x256, left round(58.5) = 58 (half to even), top 16.
  s.resize_to = 256;
  g = PlanSample(s, 500, 375, 0);
  EXPECT_EQ(g->resized_w, 341);
  EXPECT_EQ(g->win_x, 58);
  EXPECT_EQ(g->win_y, 16);
  // The box filter keeps the older geometry: crop the source, then resize.
  s.resize_to = 0;
  s.resample = Resample::kBox;
  g = PlanSample(s, 500, 375, 0);
  EXPECT_EQ(g->crop_w, 375);
  EXPECT_EQ(g->crop_h, 375);
  EXPECT_EQ(g->crop_x, 62);
  EXPECT_EQ(g->crop_y, 0);
  s.mode = ResizeMode::kLongestPad;
  s.resample = Resample::kBilinear;
  s.height = s.width = 1024;
  g = PlanSample(s, 1500, 1000, 0);
  EXPECT_EQ(g->resized_w, 1024);
  EXPECT_EQ(g->resized_h, 683);
  EXPECT_EQ(g->crop_w, 1500);
  EXPECT_EQ(g->win_w, 1024);
  EXPECT_EQ(g->win_h, 683);
}

TEST(SampleGeometryTest, RandomResizedCropFollowsTorchvision) {
  ImageSpec s;
  s.mode = ResizeMode::kRandomResizedCrop;
  int fallback = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    auto g = PlanSample(s, 500, 375, seed);
    ASSERT_TRUE(g.ok());
    ASSERT_GE(g->crop_x, 0);
    ASSERT_GE(g->crop_y, 0);
    ASSERT_LE(g->crop_x + g->crop_w, 500);
    ASSERT_LE(g->crop_y + g->crop_h, 375);
    const double frac = double(g->crop_w) * g->crop_h / (500.0 * 375);
    const double aspect = double(g->crop_w) / g->crop_h;
    if (g->crop_w == 500 && g->crop_h == 375) {
      ++fallback;
      continue;
    }
    // Rounding of w and h moves area and aspect a little off the sampled values.
    EXPECT_GE(frac, 0.08 * 0.9);
    EXPECT_LE(frac, 1.0);
    EXPECT_GE(aspect, 0.75 * 0.9);
    EXPECT_LE(aspect, 4.0 / 3 * 1.1);
    EXPECT_EQ(g->resized_w, 224);
  }
  EXPECT_LT(fallback, 20);
  // Same seed, same plan; the plan does not depend on anything else.
  auto a = PlanSample(s, 500, 375, 77), b = PlanSample(s, 500, 375, 77);
  EXPECT_EQ(a->crop_x, b->crop_x);
  EXPECT_EQ(a->crop_w, b->crop_w);
  // Impossible aspect: falls back to a center crop with the ratio clamped.
  s.ratio = {10.0f, 10.0f};
  auto f = PlanSample(s, 300, 300, 5);
  EXPECT_EQ(f->crop_w, 300);
  EXPECT_EQ(f->crop_h, 30);
  EXPECT_EQ(f->crop_y, 135);
}

}  // namespace
}  // namespace stoker
