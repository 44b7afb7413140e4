// io/zstd_reader: random reads of a zstd object equal the bytes compressed
// into it, whether one frame (restart from its start) or many (restart at the
// frame before the read); damage is reported with offsets, never read as data.
#include <gtest/gtest.h>
#include <zstd.h>

#include <random>

#include "io/compressed_test_data.h"
#include "io/posix_reader.h"
#include "io/reader.h"
#include "io/zstd_reader.h"

namespace stoker {
namespace {

using test_data::CheckRandomReads;
using test_data::Read;
using test_data::Text;
using test_data::WriteTemp;

std::string Zstd(std::string_view data, int level = 3) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  const size_t n = ZSTD_compress2(c, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(c);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(ZstdReaderTest, OneFrameAndManyFrames) {
  const std::string data = Text(2 << 20, 1);
  std::string many;
  for (size_t off = 0; off < data.size(); off += 300000) many += Zstd(data.substr(off, 300000), 19);
  for (const auto& [name, bytes] : {std::pair{"stoker_one.zst", Zstd(data)}, std::pair{"stoker_many.zst", many}}) {
    auto r = OpenReader(WriteTemp(name, bytes));  // by content
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_STREQ((*r)->Compression(), "zstd");
    EXPECT_TRUE((*r)->Damage().ok()) << (*r)->Damage().message();
    ASSERT_EQ((*r)->Size(), data.size());
    CheckRandomReads(**r, data, 60, 100000, 60);
    EXPECT_EQ(Read(**r, data.size() - 10, 10), data.substr(data.size() - 10));
  }
}

TEST(ZstdReaderTest, TruncatedAndCorruptAreDamage) {
  const std::string data = Text(1 << 20, 2);
  const std::string z = Zstd(data);
  auto t = OpenReader(WriteTemp("stoker_cut.zst", z.substr(0, z.size() / 2)));
  ASSERT_TRUE(t.ok());
  EXPECT_NE((*t)->Damage().message().find("zstd stream truncated"), std::string::npos) << (*t)->Damage().message();
  EXPECT_EQ(Read(**t, 0, (*t)->Size()), data.substr(0, (*t)->Size()));
  std::string bad = z;
  for (size_t i = z.size() / 2; i < z.size() / 2 + 16; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  auto c = OpenReader(WriteTemp("stoker_flip.zst", bad));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Damage().code(), StatusCode::kDataLoss);
  EXPECT_NE((*c)->Damage().message().find("stoker_flip.zst: zstd data corrupt"), std::string::npos)
      << (*c)->Damage().message();
}

}  // namespace
}  // namespace stoker
