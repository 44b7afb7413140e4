// Tests for formats/zip: writer round trips (stored, deflated), archives built
// by hand the way numpy writes them (zip64 local headers, zip64 directory),
// and corruption (CRC, truncation).
#include "formats/zip.h"

#include <gtest/gtest.h>

#include <string>

namespace stoker {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Bitwise CRC-32 (IEEE 802.3, reflected): an independent reference for libdeflate's.
uint32_t Crc32(const std::string& s) {
  uint32_t c = 0xffffffff;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

void Put(std::vector<uint8_t>& o, uint64_t v, size_t n) {
  for (size_t k = 0; k < n; ++k) o.push_back(static_cast<uint8_t>(v >> (8 * k)));
}
void PutStr(std::vector<uint8_t>& o, const std::string& s) { o.insert(o.end(), s.begin(), s.end()); }

std::string Extract(std::span<const uint8_t> zip, const ZipEntry& e) {
  std::string out(e.uncompressed_size, '\0');
  Status s = ExtractZipEntry(zip, e, {reinterpret_cast<uint8_t*>(out.data()), out.size()});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ZipTest, WriterRoundTripsStoredAndDeflatedEntries) {
  std::string small = "tiny";
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "row " + std::to_string(i % 17) + " of a compressible array\n";
  std::string empty;
  ZipWriter w;
  w.Add("a.npy", Bytes(small), false);
  w.Add("dir/b.npy", Bytes(text), true);
  w.Add("empty.npy", Bytes(empty), true);
  std::vector<uint8_t> zip = w.Finish();

  auto entries = ListZip(zip);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  const ZipEntry &a = (*entries)[0], &b = (*entries)[1];
  EXPECT_EQ(a.name, "a.npy");
  EXPECT_EQ(a.method, 0);
  EXPECT_EQ(a.crc32, Crc32(small));
  EXPECT_EQ(b.name, "dir/b.npy");
  EXPECT_EQ(b.method, 8);
  EXPECT_LT(b.compressed_size, text.size() / 4);
  EXPECT_EQ(b.uncompressed_size, text.size());
  EXPECT_EQ(b.crc32, Crc32(text));
  EXPECT_EQ(Extract(zip, a), small);
  EXPECT_EQ(Extract(zip, b), text);
  EXPECT_EQ(Extract(zip, (*entries)[2]), "");

  auto view = StoredZipEntryData(zip, a);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::string(view->begin(), view->end()), small);
  EXPECT_GE(view->data(), zip.data());  // in place, not a copy
  EXPECT_LT(view->data(), zip.data() + zip.size());
  EXPECT_EQ(StoredZipEntryData(zip, b).status().code(), StatusCode::kInvalidArgument);
}

TEST(ZipTest, CorruptDataFailsNamingTheEntry) {
  std::string text(5000, 'z');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = static_cast<char>('a' + i % 13);
  ZipWriter w;
  w.Add("stored.npy", Bytes(text), false);
  w.Add("packed.npy", Bytes(text), true);
  std::vector<uint8_t> zip = w.Finish();
  auto entries = ListZip(zip);
  ASSERT_TRUE(entries.ok());
  const ZipEntry &stored = (*entries)[0], &packed = (*entries)[1];

  std::vector<uint8_t> bad = zip;
  bad[30 + stored.name.size() + 100] ^= 0x40;  // a byte of stored data
  std::string out(text.size(), '\0');
  Status s = ExtractZipEntry(bad, stored, {reinterpret_cast<uint8_t*>(out.data()), out.size()});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("stored.npy"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("CRC"), std::string::npos) << s.message();
  EXPECT_EQ(StoredZipEntryData(bad, stored).status().code(), StatusCode::kDataLoss);

  // A wrong CRC in the directory is caught for deflated entries too.
  ZipEntry wrong = packed;
  wrong.crc32 ^= 1;
  s = ExtractZipEntry(zip, wrong, {reinterpret_cast<uint8_t*>(out.data()), out.size()});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("packed.npy"), std::string::npos) << s.message();

  // A corrupted deflate stream: either the inflate or the CRC fails.
  bad = zip;
  bad[packed.local_header_offset + 30 + packed.name.size() + packed.compressed_size / 2] ^= 0xff;
  s = ExtractZipEntry(bad, packed, {reinterpret_cast<uint8_t*>(out.data()), out.size()});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("packed.npy"), std::string::npos) << s.message();

  // Output of the wrong size is the caller's error.
  std::string small(10, '\0');
  EXPECT_EQ(ExtractZipEntry(zip, stored, {reinterpret_cast<uint8_t*>(small.data()), small.size()}).code(),
            StatusCode::kInvalidArgument);
}

// One stored entry the way numpy's savez writes it (force_zip64=True): the
// local header's sizes read 0xFFFFFFFF and a zip64 extra holds them; the
// central directory has the plain sizes.
std::vector<uint8_t> NumpyStyleZip(const std::string& name, const std::string& data, bool zip64_directory) {
  std::vector<uint8_t> z;
  const uint32_t crc = Crc32(data);
  Put(z, 0x04034b50, 4);
  Put(z, 45, 2);
  Put(z, 0, 2);
  Put(z, 0, 2);  // stored
  Put(z, 0, 4);  // time, date
  Put(z, crc, 4);
  Put(z, 0xffffffff, 4);
  Put(z, 0xffffffff, 4);
  Put(z, name.size(), 2);
  Put(z, 20, 2);
  PutStr(z, name);
  Put(z, 0x0001, 2);
  Put(z, 16, 2);
  Put(z, data.size(), 8);
  Put(z, data.size(), 8);
  PutStr(z, data);

  const uint64_t cd = z.size();
  Put(z, 0x02014b50, 4);
  Put(z, 45, 2);
  Put(z, 45, 2);
  Put(z, 0, 2);
  Put(z, 0, 2);
  Put(z, 0, 4);
  Put(z, crc, 4);
  // An unrelated extra field first, so the reader must walk to 0x0001.
  std::vector<uint8_t> extra = {0x55, 0x54, 5, 0, 1, 0, 0, 0, 0};  // "UT" timestamp
  if (zip64_directory) {
    Put(z, 0xffffffff, 4);
    Put(z, 0xffffffff, 4);
    Put(extra, 0x0001, 2);
    Put(extra, 24, 2);
    Put(extra, data.size(), 8);  // uncompressed first, then compressed, then offset
    Put(extra, data.size(), 8);
    Put(extra, 0, 8);
  } else {
    Put(z, data.size(), 4);
    Put(z, data.size(), 4);
  }
  Put(z, name.size(), 2);
  Put(z, extra.size(), 2);
  Put(z, 0, 2);
  Put(z, 0, 2);
  Put(z, 0, 2);
  Put(z, 0, 4);
  Put(z, zip64_directory ? 0xffffffff : 0, 4);
  PutStr(z, name);
  z.insert(z.end(), extra.begin(), extra.end());
  const uint64_t cd_size = z.size() - cd;

  if (zip64_directory) {
    const uint64_t rec = z.size();
    Put(z, 0x06064b50, 4);
    Put(z, 44, 8);
    Put(z, 45, 2);
    Put(z, 45, 2);
    Put(z, 0, 4);
    Put(z, 0, 4);
    Put(z, 1, 8);
    Put(z, 1, 8);
    Put(z, cd_size, 8);
    Put(z, cd, 8);
    Put(z, 0x07064b50, 4);
    Put(z, 0, 4);
    Put(z, rec, 8);
    Put(z, 1, 4);
  }
  Put(z, 0x06054b50, 4);
  Put(z, 0, 4);
  Put(z, zip64_directory ? 0xffff : 1, 2);
  Put(z, zip64_directory ? 0xffff : 1, 2);
  Put(z, zip64_directory ? 0xffffffff : cd_size, 4);
  Put(z, zip64_directory ? 0xffffffff : cd, 4);
  const std::string comment = "archive comment";
  Put(z, comment.size(), 2);
  PutStr(z, comment);
  return z;
}

TEST(ZipTest, ReadsNumpyStyleZip64LocalHeaders) {
  std::string data = "\x93NUMPY payload bytes";
  for (bool zip64_directory : {false, true}) {
    std::vector<uint8_t> zip = NumpyStyleZip("arr_0.npy", data, zip64_directory);
    auto entries = ListZip(zip);
    ASSERT_TRUE(entries.ok()) << entries.status().ToString();
    ASSERT_EQ(entries->size(), 1u);
    const ZipEntry& e = (*entries)[0];
    EXPECT_EQ(e.name, "arr_0.npy");
    EXPECT_EQ(e.compressed_size, data.size());
    EXPECT_EQ(e.uncompressed_size, data.size());
    EXPECT_EQ(e.local_header_offset, 0u);
    EXPECT_EQ(Extract(zip, e), data);
    auto view = StoredZipEntryData(zip, e);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    EXPECT_EQ(std::string(view->begin(), view->end()), data);
  }
}

TEST(ZipTest, MalformedArchivesAreDataLoss) {
  ZipWriter w;
  std::string data(3000, 'd');
  w.Add("x.npy", Bytes(data), false);
  std::vector<uint8_t> zip = w.Finish();

  std::vector<uint8_t> cut(zip.begin(), zip.begin() + 2000);  // no end record at all
  EXPECT_EQ(ListZip(cut).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ListZip(std::vector<uint8_t>(10)).status().code(), StatusCode::kDataLoss);

  // Data cut short while the directory survives: the entry runs past the end.
  auto entries = ListZip(zip);
  ASSERT_TRUE(entries.ok());
  std::string out(data.size(), '\0');
  std::vector<uint8_t> head(zip.begin(), zip.begin() + 1000);
  Status s = ExtractZipEntry(head, (*entries)[0], {reinterpret_cast<uint8_t*>(out.data()), out.size()});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("x.npy"), std::string::npos) << s.message();

  // A directory pointing past the end of the archive.
  std::vector<uint8_t> bad = zip;
  bad[bad.size() - 3] = 0x7f;  // high byte of the central directory offset
  EXPECT_EQ(ListZip(bad).status().code(), StatusCode::kDataLoss);

  // Saturated sizes with no zip64 extra field.
  std::vector<uint8_t> sat = NumpyStyleZip("a", "b", false);
  const size_t cd = sat.size() - 22 - 15 - (46 + 1 + 9);
  ASSERT_EQ(sat[cd], 0x50);
  std::fill(sat.begin() + cd + 20, sat.begin() + cd + 24, 0xff);
  EXPECT_EQ(ListZip(sat).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace stoker
