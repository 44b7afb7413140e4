// ShardStream (pipeline/shard_stream.h): a tar read front to back gives its
// samples in order, each with its members' data packed (no tar headers or
// padding), and its members' offsets and its begin the shard's (checked
// against the file's own bytes); and a sample's bytes are trimmed to their
// size, so the shuffle buffer that holds them does not also hold the vector's
// growth (a small member after a large one would leave up to twice the
// sample's bytes).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/tar.h"
#include "pipeline/shard_stream.h"

namespace stoker {
namespace {

// `name` in a folder of its own (ExpectEndAndRemove removes it).
std::string TempShardPath(const std::string& name) {
  char tmpl[] = "/tmp/stoker-shard-stream-XXXXXX";
  return std::string(mkdtemp(tmpl)) + "/" + name;
}

std::string LargeThenSmall(int samples) {
  const std::string path = TempShardPath("s.tar");
  auto w = TarWriter::Create(path);
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < samples; ++i) {
    const std::vector<uint8_t> big(50'000 + i, static_cast<uint8_t>(i));
    const std::string caption = "caption " + std::to_string(i);
    EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".bin", big).ok());
    EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".txt",
                       {reinterpret_cast<const uint8_t*>(caption.data()), caption.size()}).ok());
  }
  EXPECT_TRUE(w->Close().ok());
  return path;
}

std::string FileBytes(const std::string& path, uint64_t offset, size_t size) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(size, '\0');
  in.read(out.data(), static_cast<std::streamsize>(size));
  return out;
}

// Each member's bytes, cut from the sample's packed data, are the file's at
// the member's offset.
void ExpectMembersAreTheFilesBytes(const std::string& path, const StreamSample& s, const SampleView& view) {
  for (const MemberView member : view.members) {
    const std::span<const uint8_t> data = member.data(s.data());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(data.data()), data.size()),
              FileBytes(path, member.offset, member.size))
        << view.key << " member " << member.name();
  }
}

// The stream has no sample left; its shard's folder is removed.
void ExpectEndAndRemove(ShardStream& stream, const std::string& path) {
  Result<std::optional<StreamSample>> end = stream.Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(ShardStreamTest, SamplesComeInOrderWithTheirDataPackedAndTrimmedToSize) {
  const std::string path = LargeThenSmall(5);
  auto stream = ShardStream::Open(path, /*shard=*/0, DefaultIoOptions());
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (int i = 0; i < 5; ++i) {
    Result<std::optional<StreamSample>> next = (*stream)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    const StreamSample& s = **next;
    const SampleEntry entry = s.Entry();
    EXPECT_EQ(entry.key, "k" + std::to_string(i));
    ASSERT_EQ(entry.members.size(), 2u);
    EXPECT_TRUE(entry.packed);
    EXPECT_EQ(s.data().size(), 50'000u + i + ("caption " + std::to_string(i)).size()) << "headers or padding kept";
    // What it holds: its data and its entry encoded (key, begin, end, two members of field
    // and 2 numbers, each name being key.field: about 80 bytes), not the vector's growth.
    EXPECT_LT(s.HeldBytes(), s.data().size() + 100) << "sample " << i << " keeps its vector's growth";
    // The sample begins at its first member's tar header, whose name field the file holds there.
    const std::string first_name = "k" + std::to_string(i) + ".bin";
    EXPECT_EQ(FileBytes(path, entry.begin, first_name.size()), first_name);
    EXPECT_EQ(entry.members[0].name, first_name);
    EXPECT_EQ(entry.members[1].field, "txt");
    const SampleView view = entry.view();
    ExpectMembersAreTheFilesBytes(path, s, view);
    EXPECT_EQ(view.members[0].size, 50'000u + i);
    const std::span<const uint8_t> txt = view.members[1].data(s.data());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(txt.data()), txt.size()), "caption " + std::to_string(i));
  }
  ExpectEndAndRemove(**stream, path);
}

// Members of 1 byte to half a local read window, so they come through the
// window: over a 13 MB shard they straddle the window's edge at every offset
// the sizes give (the window keeps the part it holds and reads on). Every
// member's bytes are the file's.
TEST(ShardStreamTest, SmallMembersAcrossManyWindowsAreTheFilesBytes) {
  const std::string path = TempShardPath("small.tar");
  {
    auto w = TarWriter::Create(path);
    ASSERT_TRUE(w.ok());
    uint32_t x = 12345;
    for (int i = 0; i < 400; ++i) {
      for (const char* ext : {"a", "b"}) {
        x = x * 1664525u + 1013904223u;
        std::vector<uint8_t> bytes(1 + (x >> 8) % (TarStream::kLocalStreamWindow / 2 - 1));
        for (size_t j = 0; j < bytes.size(); ++j) bytes[j] = static_cast<uint8_t>((x >> 16) + j * 7 + i);
        ASSERT_TRUE(w->Add("k" + std::to_string(i) + "." + ext, bytes).ok());
      }
    }
    ASSERT_TRUE(w->Close().ok());
  }
  auto stream = ShardStream::Open(path, /*shard=*/0, DefaultIoOptions());
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (int i = 0; i < 400; ++i) {
    Result<std::optional<StreamSample>> next = (*stream)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    const StreamSample& s = **next;
    const SampleEntry entry = s.Entry();
    ASSERT_EQ(entry.key, "k" + std::to_string(i));
    const SampleView view = entry.view();
    ASSERT_EQ(view.members.size(), 2u);
    ExpectMembersAreTheFilesBytes(path, s, view);
  }
  ExpectEndAndRemove(**stream, path);
}

}  // namespace
}  // namespace stoker
