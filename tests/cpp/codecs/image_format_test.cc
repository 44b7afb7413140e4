// tests/cpp/codecs/image_format_test.cc — content sniffing and the PNG/WebP
// decoders on hand-made inputs (Pillow equality is in tests/python/test_formats.py).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codecs/image_decoder.h"
#include "codecs/image_format.h"
#include "codecs/png.h"
#include "codecs/webp.h"

namespace stoker {
namespace {

std::vector<uint8_t> V(const std::string& s) { return {s.begin(), s.end()}; }

TEST(ImageFormatTest, SniffsMagic) {
  EXPECT_EQ(SniffImageFormat(V("\xff\xd8\xff\xe0rest")), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(V(std::string("\x89PNG\r\n\x1a\n", 8) + "IHDR")), ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(V(std::string("RIFF\x10\x00\x00\x00WEBPVP8 ", 16))), ImageFormat::kWebp);
  EXPECT_EQ(SniffImageFormat(V(std::string("RIFF\x10\x00\x00\x00WAVE", 12))), ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat(V("")), ImageFormat::kUnknown);
  EXPECT_STREQ(ImageFormatName(ImageFormat::kPng), "PNG");
}

TEST(ImageFormatTest, BrokenPngAndWebpAreDataLoss) {
  std::vector<uint8_t> rgb;
  int w = 0, h = 0;
  Status png = DecodePngRgb(V(std::string("\x89PNG\r\n\x1a\n", 8) + "garbage"), rgb, &w, &h);
  EXPECT_EQ(png.code(), StatusCode::kDataLoss);
  EXPECT_NE(png.message().find("PNG"), std::string::npos);
  Status webp = DecodeWebpRgb(V(std::string("RIFF\x10\x00\x00\x00WEBPVP8 garbage", 23)), rgb, &w, &h);
  EXPECT_EQ(webp.code(), StatusCode::kDataLoss);
  // Unknown bytes go to the JPEG decoder, whose error names what it expected.
  ImageDecoder dec;
  ImageSpec spec;
  std::vector<uint8_t> out(spec.OutputBytes());
  EXPECT_FALSE(dec.DecodeInto(V("not an image"), spec, 0, out).ok());
}

}  // namespace
}  // namespace stoker
