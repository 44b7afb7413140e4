// ShardStream (pipeline/shard_stream.h): a tar read front to back gives its
// samples in order, each with the shard's bytes [begin, end) and its members'
// shard offsets; and a sample's bytes are trimmed to their size, so the
// shuffle buffer that holds them does not also hold the vector's growth (a
// small member after a large one would leave up to twice the sample's bytes).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "formats/tar.h"
#include "pipeline/shard_stream.h"

namespace stoker {
namespace {

std::string LargeThenSmall(int samples) {
  char tmpl[] = "/tmp/stoker-shard-stream-XXXXXX";
  const std::string path = std::string(mkdtemp(tmpl)) + "/s.tar";
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

TEST(ShardStreamTest, SamplesComeInOrderWithTheirBytesTrimmedToSize) {
  const std::string path = LargeThenSmall(5);
  auto stream = ShardStream::Open(path, /*shard=*/0, DefaultIoOptions());
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (int i = 0; i < 5; ++i) {
    Result<std::optional<StreamSample>> next = (*stream)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    const StreamSample& s = **next;
    EXPECT_EQ(s.entry.key, "k" + std::to_string(i));
    ASSERT_EQ(s.entry.members.size(), 2u);
    EXPECT_EQ(s.bytes.size(), s.entry.end - s.entry.begin);
    EXPECT_EQ(s.bytes.capacity(), s.bytes.size()) << "sample " << i << " keeps its vector's growth";
    const MemberRef& big = s.entry.members[0];
    EXPECT_EQ(big.size, 50'000u + i);
    EXPECT_EQ(s.bytes[big.offset - s.entry.begin], static_cast<uint8_t>(i));
    const MemberRef& txt = s.entry.members[1];
    const std::string caption(reinterpret_cast<const char*>(s.bytes.data() + (txt.offset - s.entry.begin)), txt.size);
    EXPECT_EQ(caption, "caption " + std::to_string(i));
  }
  Result<std::optional<StreamSample>> end = (*stream)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace stoker
