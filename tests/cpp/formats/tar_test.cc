// Tests for formats/tar: ScanTar against hand-built ustar, GNU and pax bytes,
// truncation and corruption, and TarWriter round trips.
#include "formats/tar.h"

#include <gtest/gtest.h>

#include <atomic>

#include "formats/tar_bytes.h"
#include "io/reader.h"

namespace stoker {
namespace {

using testing::EndBlocks;
using testing::Header;
using testing::Padded;
using testing::PaxRecord;
using testing::TempPath;
using testing::WriteFile;

Result<std::vector<TarMember>> ScanBytes(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  WriteFile(path, bytes);
  return ScanTar(path);
}

std::string Slice(const std::string& bytes, const TarMember& m) { return bytes.substr(m.data_offset, m.size); }

TEST(TarTest, ReadsPlainUstarMembersAndSkipsNonFiles) {
  std::string tar = Header("dir/", 0, '5') + Header("dir/a.txt", 5, '0') + Padded("hello") +
                    Header("dir/link", 0, '2') + Header("dir/b.bin", 0, '\0') + Header("dir/c.dat", 3, '7') +
                    Padded("xyz") + EndBlocks();
  auto r = ScanBytes("plain.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "dir/a.txt");
  EXPECT_EQ((*r)[0].header_offset, 512u);
  EXPECT_EQ((*r)[0].data_offset, 1024u);
  EXPECT_EQ(Slice(tar, (*r)[0]), "hello");
  EXPECT_EQ((*r)[1].name, "dir/b.bin");
  EXPECT_EQ((*r)[1].size, 0u);
  EXPECT_EQ((*r)[2].name, "dir/c.dat");  // contiguous file ('7') is a regular file
  EXPECT_EQ(Slice(tar, (*r)[2]), "xyz");
}

TEST(TarTest, JoinsUstarPrefixAndName) {
  std::string prefix(120, 'p');
  std::string tar = Header("leaf.jpg", 2, '0', testing::kPosixMagic, prefix) + Padded("ok") + EndBlocks();
  auto r = ScanBytes("prefix.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, prefix + "/leaf.jpg");
}

TEST(TarTest, ReadsGnuLongNamesAndLongLinks) {
  std::string long_name = std::string(150, 'n') + "/sample.features.npy";
  std::string long_link = std::string(200, 'l');
  std::string tar =
      // 'K' long link for a symlink (skipped), then 'L' long name for a file.
      Header("././@LongLink", long_link.size() + 1, 'K', testing::kGnuMagic) + Padded(long_link + '\0') +
      Header("short-link", 0, '2', testing::kGnuMagic) +
      Header("././@LongLink", long_name.size() + 1, 'L', testing::kGnuMagic) + Padded(long_name + '\0') +
      Header(long_name.substr(0, 100), 4, '0', testing::kGnuMagic) + Padded("data") +
      Header("after.txt", 1, '0', testing::kGnuMagic) + Padded("z") + EndBlocks();
  auto r = ScanBytes("gnu.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, long_name);
  EXPECT_EQ((*r)[0].header_offset, 1536u);  // the 'L' header, so a sample range covers it
  EXPECT_EQ((*r)[0].data_offset, 1536u + 512 + 512 + 512);
  EXPECT_EQ(Slice(tar, (*r)[0]), "data");
  EXPECT_EQ((*r)[1].name, "after.txt");  // the long name applied to one member only
}

TEST(TarTest, ReadsPaxPathAndSizeAndIgnoresGlobalHeaders) {
  std::string long_name = "shards/" + std::string(300, 'x') + ".jpg";
  std::string global = PaxRecord("comment", "global headers are ignored") + PaxRecord("path", "not/this.txt");
  std::string local = PaxRecord("mtime", "1700000000.5") + PaxRecord("path", long_name) + PaxRecord("size", "700");
  std::string payload(700, 'q');
  std::string tar = Header("pax_global_header", global.size(), 'g') + Padded(global) +
                    Header("PaxHeaders/x", local.size(), 'x') + Padded(local) +
                    // The ustar size field says 0; the pax size record wins.
                    Header("truncated-name", 0, '0') + Padded(payload) + Header("next.cls", 1, '0') + Padded("7") +
                    EndBlocks();
  auto r = ScanBytes("pax.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, long_name);
  EXPECT_EQ((*r)[0].size, 700u);
  EXPECT_EQ((*r)[0].header_offset, 512u + Padded(global).size());
  EXPECT_EQ(Slice(tar, (*r)[0]), payload);
  EXPECT_EQ((*r)[1].name, "next.cls");
  EXPECT_EQ(Slice(tar, (*r)[1]), "7");
}

TEST(TarTest, ReadsBase256Size) {
  std::string field(12, '\0');
  field[0] = static_cast<char>(0x80);
  field[10] = 0x02;  // 0x0203 = 515 bytes
  field[11] = 0x03;
  std::string payload(515, 'b');
  std::string tar = Header("big.bin", 0, '0', testing::kGnuMagic, "", field) + Padded(payload) + EndBlocks();
  auto r = ScanBytes("b256.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].size, 515u);
  EXPECT_EQ(Slice(tar, (*r)[0]), payload);
}

TEST(TarTest, EndsAtCleanEofOnABlockBoundary) {
  std::string tar = Header("a.txt", 1, '0') + Padded("a");
  auto r = ScanBytes("noend.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 1u);
  auto empty = ScanBytes("empty.tar", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(TarTest, LoneZeroBlockBeforeMoreMembersIsDataLoss) {
  std::string tar = Header("a.txt", 1, '0') + Padded("a") + std::string(512, '\0') + Header("b.txt", 1, '0') +
                    Padded("b") + EndBlocks();
  auto r = ScanBytes("lone_zero.tar", tar);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("offset 1024"), std::string::npos) << r.status().message();
  // One zero block at the very end is a complete archive.
  auto one = ScanBytes("one_zero.tar", Header("a.txt", 1, '0') + Padded("a") + std::string(512, '\0'));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->size(), 1u);
}

TEST(TarTest, TruncatedDataIsDataLossNamingPathMemberAndOffset) {
  std::string tar = Header("a.txt", 1, '0') + Padded("a") + Header("b.jpg", 2000, '0') + std::string(1500, 'j');
  std::string path = TempPath("trunc_data.tar");
  WriteFile(path, tar);
  auto r = ScanTar(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("b.jpg"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 1024"), std::string::npos) << msg;  // its header
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(TarTest, TruncatedHeaderIsDataLossNamingPathAndOffset) {
  std::string tar = Header("a.txt", 1, '0') + Padded("a") + Header("b.txt", 1, '0').substr(0, 300);
  std::string path = TempPath("trunc_header.tar");
  WriteFile(path, tar);
  auto r = ScanTar(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("offset 1024"), std::string::npos) << r.status().message();
}

TEST(TarTest, TruncatedInsideExtensionHeaderIsDataLoss) {
  std::string recs = PaxRecord("path", std::string(400, 'p'));
  std::string tar = Header("x", recs.size(), 'x') + recs.substr(0, 100);
  auto r = ScanBytes("trunc_pax.tar", tar);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("offset 0"), std::string::npos) << r.status().message();
}

TEST(TarTest, ArchiveCutAfterAnExtensionHeaderIsDataLoss) {
  // A pax header with only records the scanner ignores, then the end of the
  // file: its member was cut off, not absent.
  std::string recs = PaxRecord("mtime", "1700000000.5");
  std::string tar = Header("a.cls", 1, '0') + Padded("1") + Header("PaxHeaders/b", recs.size(), 'x') + Padded(recs);
  auto r = ScanBytes("cut_after_pax.tar", tar);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("offset 1024"), std::string::npos) << r.status().message();
}

TEST(TarTest, BadChecksumIsDataLoss) {
  std::string h = Header("a.txt", 1, '0');
  h[10] ^= 1;  // name changes, checksum does not
  auto r = ScanBytes("badsum.tar", Header("ok.txt", 0, '0') + h + Padded("a") + EndBlocks());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos);
  EXPECT_NE(r.status().message().find("offset 512"), std::string::npos) << r.status().message();
}

TEST(TarTest, MalformedPaxRecordIsDataLoss) {
  std::string recs = "99 path=short\n";  // length does not match the record
  auto r = ScanBytes("badpax.tar", Header("x", recs.size(), 'x') + Padded(recs) + Header("a", 0, '0') + EndBlocks());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

TEST(TarTest, WriterRoundTripsThroughScanner) {
  std::string path = TempPath("written.tar");
  std::vector<std::pair<std::string, std::string>> files;
  // Names around the 100-byte limit and around pax record-length digit
  // boundaries, empty and multi-block payloads.
  for (size_t len : {1, 99, 100, 101, 155, 250, 990, 993, 995, 1000}) {
    std::string name = std::string(len - 1, 'a' + static_cast<char>(len % 26)) + "x";
    files.emplace_back(name, std::string(len * 7 % 1300, static_cast<char>(len)));
  }
  files.emplace_back("empty.bin", "");
  {
    auto w = TarWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (auto& [name, data] : files) {
      ASSERT_TRUE(w->Add(name, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}).ok());
    }
    ASSERT_TRUE(w->Close().ok());
    std::string bytes = testing::ReadFileBytes(path);
    EXPECT_EQ(w->bytes_written(), bytes.size());
    EXPECT_EQ(bytes.size() % 10240, 0u);
  }
  std::string bytes = testing::ReadFileBytes(path);
  auto r = ScanTar(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ((*r)[i].name, files[i].first);
    EXPECT_EQ(Slice(bytes, (*r)[i]), files[i].second);
    // Long names carry a pax header before the ustar one.
    EXPECT_EQ((*r)[i].data_offset - (*r)[i].header_offset > 512, files[i].first.size() > 100) << i;
  }
  // The writer's headers are valid ustar: magic, mode, empty owner names.
  EXPECT_EQ(bytes.substr(257, 8), std::string("ustar\0" "00", 8));
  EXPECT_EQ(bytes.substr(100, 8), std::string("0000644\0", 8));
  EXPECT_EQ(bytes[265], '\0');
}

TEST(TarTest, ManySmallMembersAcrossReadWindows) {
  // Thousands of members straddle the scanner's 64 KiB windows at every phase.
  std::string tar;
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    std::string name = "s" + std::to_string(i) + ".bin";
    std::string data(static_cast<size_t>(i * 37 % 1700), static_cast<char>(i));
    tar += Header(name, data.size(), '0') + Padded(data);
    names.push_back(name);
  }
  tar += Header("huge.bin", 300000, '0') + std::string(300000, 'h') + std::string(512 - 300000 % 512, '\0');
  names.push_back("huge.bin");
  tar += Header("last.txt", 4, '0') + Padded("last") + EndBlocks();
  names.push_back("last.txt");
  auto r = ScanBytes("many.tar", tar);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ((*r)[i].name, names[i]);
  EXPECT_EQ(Slice(tar, r->back()), "last");
}

// Counts what a scan reads; `preferred` stands for the reader's kind (a
// local file's 64 KiB, a remote object's megabytes).
class CountingReader : public RandomAccessReader {
 public:
  CountingReader(const RandomAccessReader* inner, size_t preferred) : inner_(inner), preferred_(preferred) {}
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    reads++;
    bytes += out.size();
    return inner_->ReadAt(offset, out);
  }
  uint64_t Size() const override { return inner_->Size(); }
  const std::string& Name() const override { return inner_->Name(); }
  size_t PreferredReadSize() const override { return preferred_; }
  mutable std::atomic<uint64_t> reads{0}, bytes{0};

 private:
  const RandomAccessReader* inner_;
  size_t preferred_;
};

TEST(TarTest, MembersOfTensOfKilobytesCostAPageEachLocallyAndWholeWindowsRemotely) {
  // 64 samples of a 1-byte label and a ~50 KB image, as an ImageNet shard:
  // every refill lands past the window, among image bytes.
  std::string tar;
  for (int i = 0; i < 64; ++i) {
    tar += Header("s" + std::to_string(i) + ".cls", 1, '0') + Padded("7");
    const std::string image(40000 + static_cast<size_t>(i) * 331, static_cast<char>(i));
    tar += Header("s" + std::to_string(i) + ".jpg", image.size(), '0') + Padded(image);
  }
  tar += EndBlocks();
  const std::string path = TempPath("images.tar");
  WriteFile(path, tar);
  auto file = OpenReader(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  CountingReader local(file->get(), 64 * 1024);
  auto r = ScanTar(local, tar.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 128u);
  EXPECT_EQ((*r)[127].name, "s63.jpg");
  EXPECT_LE(local.reads.load(), 64u + 2);       // a page per label+image header pair
  EXPECT_LE(local.bytes.load(), tar.size() / 8);  // not the image bytes (~2.9 MB)
  CountingReader remote(file->get(), 8u << 20);
  auto again = ScanTar(remote, tar.size());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->size(), 128u);
  EXPECT_LE(remote.reads.load(), 2u);  // one round trip covers the shard
}

// As a remote object: PreferredReadSize megabytes, and TarStream reads ahead.
class RemoteCountingReader : public CountingReader {
 public:
  using CountingReader::CountingReader;
  bool remote() const override { return true; }
};

// TarStream: the same members as ScanTar, each with its data, over any window
// phase; local (no read ahead) and remote (a read ahead on its own thread,
// windows growing from 1 to 4 MiB).
void CheckStream(const std::string& tar, const std::vector<TarMember>& scanned, const RandomAccessReader& reader) {
  TarStream stream(reader, reader.Size(), /*small_start=*/true);
  size_t i = 0;
  while (true) {
    auto m = stream.Next();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    if (!*m) break;
    ASSERT_LT(i, scanned.size());
    EXPECT_EQ((*m)->name, scanned[i].name);
    EXPECT_EQ((*m)->data_offset, scanned[i].data_offset);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(stream.Append((*m)->data_offset, (*m)->data_offset + (*m)->size, &bytes).ok());
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), Slice(tar, scanned[i])) << (*m)->name;
    ++i;
  }
  EXPECT_EQ(i, scanned.size());
}

TEST(TarStreamTest, YieldsScanTarsMembersWithTheirBytesFrontToBack) {
  std::string tar;
  for (int i = 0; i < 400; ++i) {
    std::string data(static_cast<size_t>(i * 997 % 9000), static_cast<char>('a' + i % 26));
    tar += Header("s" + std::to_string(i) + ".bin", data.size(), '0') + Padded(data);
  }
  // Larger than the stream's window: read straight into the caller's bytes.
  tar += Header("huge.bin", 3000000, '0') + Padded(std::string(3000000, 'h')) + Header("z.txt", 1, '0') + Padded("z") +
         EndBlocks();
  const std::string path = TempPath("stream.tar");
  WriteFile(path, tar);
  auto scanned = ScanTar(path);
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  auto reader = OpenReader(path);
  ASSERT_TRUE(reader.ok());
  CountingReader local(reader->get(), 64 * 1024);
  CheckStream(tar, *scanned, local);
  // Every byte once, near enough: local windows of kLocalStreamWindow, the huge member in one read.
  EXPECT_LE(local.bytes.load(), tar.size() + TarStream::kLocalStreamWindow);
  EXPECT_LE(local.reads.load(), tar.size() / TarStream::kLocalStreamWindow + 4);
  RemoteCountingReader remote(reader->get(), 4 << 20);
  CheckStream(tar, *scanned, remote);
  // The read ahead is used, not read again: at most a window more than the archive.
  EXPECT_LE(remote.bytes.load(), tar.size() + (4u << 20));
  EXPECT_LE(remote.reads.load(), 8u);
}

TEST(TarStreamTest, TruncatedDataIsDataLossNamingFileMemberAndOffset) {
  std::string tar = Header("a.jpg", 5000, '0') + std::string(100, 'x');
  const std::string path = TempPath("stream_trunc.tar");
  WriteFile(path, tar);
  auto reader = OpenReader(path);
  ASSERT_TRUE(reader.ok());
  TarStream stream(**reader, (*reader)->Size());
  auto m = stream.Next();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find(path + ": member 'a.jpg' at offset 0: archive truncated"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace stoker
