// tests/cpp/formats/gzip_member_test.cc — ".gz" members inflated whole:
// libdeflate's own compressor writes the inputs; sizes past the trailer's
// hint, concatenated members, the limit and damage.
#include <gtest/gtest.h>
#include <libdeflate.h>

#include <string>
#include <vector>

#include "formats/gzip_member.h"

namespace stoker {
namespace {

std::vector<uint8_t> Gzip(const std::string& s) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(6);
  std::vector<uint8_t> out(libdeflate_gzip_compress_bound(c, s.size()));
  out.resize(libdeflate_gzip_compress(c, s.data(), s.size(), out.data(), out.size()));
  libdeflate_free_compressor(c);
  return out;
}

std::string Str(std::span<const uint8_t> b) { return std::string(b.begin(), b.end()); }

TEST(GzipMemberTest, FieldNames) {
  EXPECT_TRUE(IsGzipField("txt.gz"));
  EXPECT_TRUE(IsGzipField("JSON.GZ"));
  EXPECT_FALSE(IsGzipField("gz"));
  EXPECT_FALSE(IsGzipField("txt"));
  EXPECT_FALSE(IsGzipField("tgz"));
}

TEST(GzipMemberTest, InflatesOneAndConcatenatedMembers) {
  GzipInflater g;
  std::string big(300000, 'a');  // compresses ~1000x: past the first guess of 4x the input
  auto r = g.Inflate(Gzip(big), 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Str(*r), big);
  std::vector<uint8_t> two = Gzip(big);
  std::vector<uint8_t> second = Gzip("tail");
  two.insert(two.end(), second.begin(), second.end());  // the first trailer's size is not the whole
  r = g.Inflate(two, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Str(*r), big + "tail");
  std::vector<uint8_t> padded = Gzip("a");
  padded.insert(padded.end(), 7, 0);  // zero padding between and after members
  std::vector<uint8_t> b = Gzip("b");
  padded.insert(padded.end(), b.begin(), b.end());
  padded.insert(padded.end(), 3, 0);
  r = g.Inflate(padded, 100);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Str(*r), "ab");
  padded.push_back(0x55);  // a byte that starts no member
  r = g.Inflate(padded, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a gzip member at compressed byte"), std::string::npos)
      << r.status().message();
  r = g.Inflate(Gzip(""), 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 0u);
}

TEST(GzipMemberTest, LimitIsExact) {
  GzipInflater g;
  auto r = g.Inflate(Gzip(std::string(4096, 'x')), 4096);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 4096u);
  r = g.Inflate(Gzip(std::string(4097, 'x')), 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("limit of 4096"), std::string::npos) << r.status().message();
}

TEST(GzipMemberTest, DamageIsNamed) {
  GzipInflater g;
  std::string text = "hello";
  auto r = g.Inflate({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not gzip"), std::string::npos) << r.status().message();
  std::vector<uint8_t> gz = Gzip(std::string(1000, 'q') + "end");
  std::vector<uint8_t> cut(gz.begin(), gz.end() - 6);  // truncated trailer
  r = g.Inflate(cut, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("corrupt or truncated"), std::string::npos) << r.status().message();
  std::vector<uint8_t> flipped = gz;
  flipped[gz.size() - 5] ^= 0xff;  // CRC32 mismatch
  EXPECT_FALSE(g.Inflate(flipped, 1 << 20).ok());
}

}  // namespace
}  // namespace stoker
