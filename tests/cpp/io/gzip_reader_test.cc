// io/gzip_reader: random reads of a gzip object equal the bytes compressed
// into it, across access points, member boundaries and reused cursors; a
// truncated or corrupt stream is reported with its offsets, never read as data.
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <thread>

#include "io/compressed_test_data.h"
#include "io/gzip_reader.h"
#include "io/posix_reader.h"
#include "io/reader.h"

namespace stoker {
namespace {

using test_data::CheckRandomReads;
using test_data::Read;
using test_data::Text;
using test_data::WriteTemp;

// One gzip member (deflateInit2 with windowBits 31) of `data`.
std::string Gzip(std::string_view data, int level = 6) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, data.size()) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

std::unique_ptr<RandomAccessReader> OpenGz(const std::string& path, uint64_t span) {
  auto raw = PosixReader::Open(path);
  EXPECT_TRUE(raw.ok()) << raw.status().message();
  auto r = OpenGzipReader(std::move(raw).value(), span);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

TEST(GzipReaderTest, RandomReadsEqualTheData) {
  const std::string data = Text(3 << 20, 1);
  const std::string path = WriteTemp("stoker_gz_random.gz", Gzip(data));
  auto r = OpenGz(path, 64 << 10);  // many access points
  ASSERT_EQ(r->Size(), data.size());
  EXPECT_TRUE(r->Damage().ok());
  EXPECT_STREQ(r->Compression(), "gzip");
  CheckRandomReads(*r, data, 300, 200000, 2);
  // Sequential reads reuse one cursor; the tail read ends exactly at Size().
  for (uint64_t off = 0; off < data.size(); off += 100000) {
    const size_t n = std::min<uint64_t>(100000, data.size() - off);
    ASSERT_EQ(Read(*r, off, n), data.substr(off, n));
  }
  std::vector<uint8_t> past(10);
  auto got = r->ReadAt(data.size(), past);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 0u);
}

TEST(GzipReaderTest, ConcurrentReadsFromManyThreads) {
  const std::string data = Text(2 << 20, 3);
  const std::string path = WriteTemp("stoker_gz_threads.gz", Gzip(data, 1));
  auto r = OpenGz(path, 128 << 10);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 100; ++i) {
        const uint64_t off = rng() % data.size();
        const size_t n = std::min<uint64_t>(rng() % 50000 + 1, data.size() - off);
        std::string out(n, '\0');
        if (!r->PRead(off, {reinterpret_cast<uint8_t*>(out.data()), n}).ok() || out != data.substr(off, n)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(GzipReaderTest, ConcatenatedMembersAndZeroPadding) {
  const std::string a = Text(700000, 4), b = Text(900000, 5);
  const std::string path = WriteTemp("stoker_gz_members.gz", Gzip(a) + Gzip(b, 9) + std::string(512, '\0'));
  auto r = OpenGz(path, 100000);
  const std::string data = a + b;
  ASSERT_EQ(r->Size(), data.size());
  EXPECT_TRUE(r->Damage().ok()) << r->Damage().message();
  // Reads that start in the first member and end in the second cross its trailer.
  for (uint64_t off : {uint64_t{0}, uint64_t{650000}, uint64_t{699999}, uint64_t{700000}, uint64_t{1500000}}) {
    const size_t n = std::min<uint64_t>(120000, data.size() - off);
    EXPECT_EQ(Read(*r, off, n), data.substr(off, n)) << off;
  }
}

TEST(GzipReaderTest, OpenReaderDecompressesByContent) {
  const std::string data = Text(100000, 6);
  const std::string path = WriteTemp("stoker_gz_by_content.bin", Gzip(data));  // no .gz in the name
  auto r = OpenReader(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->Size(), data.size());
  EXPECT_EQ(Read(**r, 1234, 5000), data.substr(1234, 5000));
}

TEST(GzipReaderTest, TruncatedStreamKeepsItsPrefixAndSaysWhere) {
  const std::string data = Text(1 << 20, 7);
  const std::string gz = Gzip(data);
  const std::string path = WriteTemp("stoker_gz_truncated.gz", gz.substr(0, gz.size() / 2));
  auto r = OpenGz(path, 64 << 10);
  EXPECT_LT(r->Size(), data.size());
  EXPECT_GT(r->Size(), 0u);
  EXPECT_EQ(r->Damage().code(), StatusCode::kDataLoss);
  EXPECT_NE(r->Damage().message().find("stream truncated"), std::string::npos) << r->Damage().message();
  EXPECT_NE(r->Damage().message().find("compressed offset " + std::to_string(gz.size() / 2)), std::string::npos)
      << r->Damage().message();
  EXPECT_EQ(Read(*r, 0, r->Size()), data.substr(0, r->Size()));  // what decoded is right
}

TEST(GzipReaderTest, CorruptStreamIsDamage) {
  const std::string data = Text(1 << 20, 8);
  std::string gz = Gzip(data);
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  auto r = OpenGz(WriteTemp("stoker_gz_corrupt.gz", gz), 64 << 10);
  EXPECT_EQ(r->Damage().code(), StatusCode::kDataLoss);
  EXPECT_NE(r->Damage().message().find("stoker_gz_corrupt.gz: gzip"), std::string::npos) << r->Damage().message();
  // A flipped byte in the CRC trailer alone is caught too.
  std::string crc = Gzip(data);
  crc[crc.size() - 6] ^= 1;
  auto c = OpenGz(WriteTemp("stoker_gz_crc.gz", crc), 64 << 10);
  EXPECT_NE(c->Damage().message().find("incorrect data check"), std::string::npos) << c->Damage().message();
}

TEST(GzipReaderTest, TablesAreSharedAcrossOpens) {
  const std::string path = WriteTemp("stoker_gz_shared.gz", Gzip(Text(300000, 9)));
  const uint64_t before = GzipTableCache().builds;
  auto a = OpenGz(path, 1 << 20);
  auto b = OpenGz(path, 1 << 20);
  EXPECT_EQ(GzipTableCache().builds, before + 1);
}

}  // namespace
}  // namespace stoker
