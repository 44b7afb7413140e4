// tests/cpp/formats/msgpack_check_test.cc — the msgpack check's own limits
// (depth, offsets in messages); what it accepts is compared with
// msgpack.unpackb itself in tests/python/test_members.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/msgpack_check.h"

namespace stoker {
namespace {

Status Check(const std::vector<uint8_t>& b) { return CheckMsgpack(b); }

TEST(MsgpackCheckTest, ScalarsAndContainers) {
  EXPECT_TRUE(Check({0x01}).ok());
  EXPECT_TRUE(Check({0x92, 0x01, 0xa1, 'x'}).ok());          // [1, "x"]
  EXPECT_TRUE(Check({0x81, 0xa1, 'k', 0x90}).ok());          // {"k": []}
  EXPECT_TRUE(Check({0xcb, 0, 0, 0, 0, 0, 0, 0, 0}).ok());   // 0.0
  EXPECT_FALSE(Check({}).ok());
  EXPECT_FALSE(Check({0xc1}).ok());
}

TEST(MsgpackCheckTest, ErrorsNameTheByte) {
  Status st = Check({0x92, 0x01, 0xa2, 'x'});  // [1, "x?"]: the str runs past the end
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at byte 2"), std::string::npos) << st.message();
  st = Check({0x81, 0x01, 0x02});  // {1: 2}
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at byte 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("strict_map_key"), std::string::npos) << st.message();
  st = Check({0x01, 0x02});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("1 bytes follow"), std::string::npos) << st.message();
}

TEST(MsgpackCheckTest, DepthIsBounded) {
  std::vector<uint8_t> ok(kMsgpackMaxDepth, 0x91);  // [[[...]]] kMsgpackMaxDepth deep
  ok.push_back(0x01);
  EXPECT_TRUE(Check(ok).ok());
  std::vector<uint8_t> deep(kMsgpackMaxDepth + 1, 0x91);
  deep.push_back(0x01);
  Status st = Check(deep);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nested deeper"), std::string::npos) << st.message();
  // A header claiming 2^32 - 1 items over a few bytes fails at once, not after a loop.
  EXPECT_FALSE(Check({0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}).ok());
}

}  // namespace
}  // namespace stoker
