// Interop with Python's tarfile and numpy, through fixture files that
// tests/cpp/formats/make_fixtures.py writes (see its docstring for the three
// steps). Skipped unless STOKER_FIXTURES names that directory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "formats/npy.h"
#include "formats/tar.h"
#include "formats/tar_bytes.h"
#include "formats/zip.h"

namespace stoker {
namespace {

using nlohmann::json;

std::string Hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s.push_back(d[c >> 4]);
    s.push_back(d[c & 15]);
  }
  return s;
}

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

class InteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("STOKER_FIXTURES");
    if (!dir) GTEST_SKIP() << "set STOKER_FIXTURES to a directory made by tests/cpp/formats/make_fixtures.py generate";
    dir_ = dir;
    expected_ = json::parse(testing::ReadFileBytes(dir_ + "/expected.json"), nullptr, false);
    ASSERT_FALSE(expected_.is_discarded()) << dir_ << "/expected.json";
  }
  std::string dir_;
  json expected_;
};

TEST_F(InteropTest, ScansTarfileArchivesInEveryFormat) {
  for (auto& [fname, members] : expected_["tars"].items()) {
    std::string path = dir_ + "/" + fname;
    auto r = ScanTar(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string bytes = testing::ReadFileBytes(path);
    ASSERT_EQ(r->size(), members.size()) << fname;
    for (size_t i = 0; i < members.size(); ++i) {
      const TarMember& m = (*r)[i];
      EXPECT_EQ(m.name, members[i][0].get<std::string>()) << fname;
      EXPECT_EQ(m.size, members[i][1].get<uint64_t>()) << fname << " " << m.name;
      EXPECT_EQ(Hex(Bytes(bytes.substr(m.data_offset, m.size))), members[i][2].get<std::string>()) << m.name;
    }
  }
}

TEST_F(InteropTest, ReadsNpzFromSavezAndWritesWhatNumpyReads) {
  ZipWriter writer;
  int n = 0;
  for (auto& [fname, arrays] : expected_["npz"].items()) {
    std::string zip = testing::ReadFileBytes(dir_ + "/" + fname);
    auto entries = ListZip(Bytes(zip));
    ASSERT_TRUE(entries.ok()) << fname << ": " << entries.status().ToString();
    ASSERT_EQ(entries->size(), arrays.size()) << fname;
    for (size_t i = 0; i < arrays.size(); ++i) {
      const ZipEntry& e = (*entries)[i];
      ASSERT_EQ(e.name, arrays[i][0].get<std::string>());
      std::vector<uint8_t> npy(e.uncompressed_size);
      Status s = ExtractZipEntry(Bytes(zip), e, npy);
      ASSERT_TRUE(s.ok()) << fname << ": " << s.ToString();
      auto info = ParseNpyHeader(npy);
      ASSERT_TRUE(info.ok()) << e.name << ": " << info.status().ToString();
      EXPECT_EQ(DTypeName(info->dtype), arrays[i][1].get<std::string>()) << e.name;
      EXPECT_EQ(info->shape, arrays[i][2].get<std::vector<int64_t>>()) << e.name;
      std::vector<uint8_t> data(info->nbytes());
      ASSERT_TRUE(CopyNpyData(*info, npy, data).ok());
      EXPECT_EQ(Hex(data), arrays[i][3].get<std::string>()) << fname << ": " << e.name;
      if (fname == "savez.npz") {
        EXPECT_EQ(e.method, 0);
        EXPECT_TRUE(StoredZipEntryData(Bytes(zip), e).ok());
        writer.Add(e.name, EncodeNpy(info->dtype, info->shape, data), n++ % 2 == 0);
      }
    }
  }
  std::vector<uint8_t> out = writer.Finish();
  ASSERT_TRUE(WriteWholeFile(dir_ + "/stoker_written.npz", out).ok());
}

TEST_F(InteropTest, WritesATarThatTarfileReads) {
  std::string src = dir_ + "/gnu.tar";
  auto members = ScanTar(src);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  std::string bytes = testing::ReadFileBytes(src);
  auto w = TarWriter::Create(dir_ + "/stoker_written.tar");
  ASSERT_TRUE(w.ok());
  for (const TarMember& m : *members) {
    ASSERT_TRUE(w->Add(m.name, Bytes(bytes).subspan(m.data_offset, m.size)).ok());
  }
  ASSERT_TRUE(w->Close().ok());
}

}  // namespace
}  // namespace stoker
