// tests/cpp/codecs/jpeg_header_test.cc — jpeg_header.h against JPEGs that
// libjpeg itself writes (the encoder is the independent reference for what
// each file is): size, frame type, sampling, Adobe transform, and the GPU
// refusal each layout gets; truncated and garbage bytes are errors or
// "truncated", never a crash.
#include "codecs/jpeg_header.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "codecs/libjpeg_encode.h"

namespace stoker {
namespace {

using test_data::EncodeWithFactors;
using test_data::EncodeWithLibjpeg;
using test_data::LibjpegLayout;

std::vector<uint8_t> Pixels(int w, int h, int channels) {
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * channels);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 7 + i / 97);
  return v;
}

TEST(JpegHeaderTest, BaselineLayoutsAreTakenWithTheirSampling) {
  const struct {
    int h, v;
  } layouts[] = {{1, 1}, {2, 1}, {2, 2}, {1, 2}};
  for (const auto& l : layouts) {
    LibjpegLayout layout;
    layout.h_samp = l.h;
    layout.v_samp = l.v;
    const std::vector<uint8_t> jpeg = EncodeWithLibjpeg(Pixels(96, 64, 3), 96, 64, 3, layout);
    Result<JpegHeader> h = ReadJpegHeader(jpeg);
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(h->width, 96);
    EXPECT_EQ(h->height, 64);
    EXPECT_EQ(h->components, 3);
    EXPECT_EQ(h->precision, 8);
    EXPECT_EQ(h->sof, 0xC0);
    EXPECT_EQ(h->h[0], l.h);
    EXPECT_EQ(h->v[0], l.v);
    EXPECT_TRUE(h->ends_with_eoi);
    EXPECT_EQ(h->GpuRefusal(), nullptr) << l.h << "x" << l.v;
  }
  const std::vector<uint8_t> gray = EncodeWithLibjpeg(Pixels(40, 30, 1), 40, 30, 1, {});
  Result<JpegHeader> g = ReadJpegHeader(gray);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->components, 1);
  EXPECT_EQ(g->GpuRefusal(), nullptr);
}

TEST(JpegHeaderTest, WhatAGpuDecoderCannotMatchIsRefusedByName) {
  LibjpegLayout progressive;
  progressive.progressive = true;
  Result<JpegHeader> p = ReadJpegHeader(EncodeWithLibjpeg(Pixels(64, 48, 3), 64, 48, 3, progressive));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->progressive());
  EXPECT_STREQ(p->GpuRefusal(), "progressive");

  Result<JpegHeader> cmyk = ReadJpegHeader(EncodeWithFactors(Pixels(32, 32, 4), 32, 32, JCS_CMYK, JCS_CMYK,
                                                             {{1, 1}, {1, 1}, {1, 1}, {1, 1}}));
  ASSERT_TRUE(cmyk.ok());
  EXPECT_EQ(cmyk->components, 4);
  EXPECT_EQ(cmyk->adobe_transform, 0);
  EXPECT_STREQ(cmyk->GpuRefusal(), "cmyk");

  Result<JpegHeader> rgb = ReadJpegHeader(EncodeWithFactors(Pixels(32, 32, 3), 32, 32, JCS_RGB, JCS_RGB,
                                                            {{1, 1}, {1, 1}, {1, 1}}));
  ASSERT_TRUE(rgb.ok());
  EXPECT_STREQ(rgb->GpuRefusal(), "rgb");

  // 4:1:1 (luma 4x1): not a layout the GPU path takes.
  Result<JpegHeader> s411 = ReadJpegHeader(EncodeWithFactors(Pixels(64, 32, 3), 64, 32, JCS_RGB, JCS_YCbCr,
                                                             {{4, 1}, {1, 1}, {1, 1}}));
  ASSERT_TRUE(s411.ok());
  EXPECT_STREQ(s411->GpuRefusal(), "sampling");
}

TEST(JpegHeaderTest, TruncatedAndGarbageBytes) {
  const std::vector<uint8_t> jpeg = EncodeWithLibjpeg(Pixels(64, 64, 3), 64, 64, 3, {});
  // Cut inside the scan: the header reads, the missing EOI refuses it.
  std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * 3 / 4));
  Result<JpegHeader> h = ReadJpegHeader(cut);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->ends_with_eoi);
  EXPECT_STREQ(h->GpuRefusal(), "truncated");
  // Cut inside the headers: an error naming an offset, at every length.
  for (size_t n = 0; n < 200; ++n) {
    std::vector<uint8_t> head(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(n));
    Result<JpegHeader> r = ReadJpegHeader(head);
    if (!r.ok()) EXPECT_NE(r.status().message().find("offset"), std::string::npos) << r.status().message();
  }
  std::vector<uint8_t> garbage(300, 0xFF);
  garbage[1] = 0xD8;
  EXPECT_FALSE(ReadJpegHeader(garbage).ok());
  EXPECT_FALSE(ReadJpegHeader(std::vector<uint8_t>{'P', 'N', 'G', 0}).ok());
}

}  // namespace
}  // namespace stoker
