// tests/cpp/formats/text_check_test.cc — UTF-8 and JSON checks of text fields.
#include <gtest/gtest.h>

#include <string>

#include "formats/text_check.h"

namespace stoker {
namespace {

std::span<const uint8_t> B(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(TextCheckTest, Utf8AcceptsWhatPythonAccepts) {
  EXPECT_TRUE(CheckUtf8(B("")).ok());
  EXPECT_TRUE(CheckUtf8(B("plain ascii\n")).ok());
  EXPECT_TRUE(CheckUtf8(B("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x88")).ok());  // é 日本 🐈
}

TEST(TextCheckTest, Utf8RejectsWithOffset) {
  Status st = CheckUtf8(B("ok \xff"));
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("byte 3"), std::string::npos) << st.message();
  EXPECT_FALSE(CheckUtf8(B("\xc0\xaf")).ok());          // overlong '/'
  EXPECT_FALSE(CheckUtf8(B("\xed\xa0\x80")).ok());      // surrogate U+D800
  EXPECT_FALSE(CheckUtf8(B("\xf4\x90\x80\x80")).ok());  // > U+10FFFF
  EXPECT_FALSE(CheckUtf8(B("ab\xe6\x97")).ok());        // truncated
}

TEST(TextCheckTest, Json) {
  EXPECT_TRUE(CheckJson(B(R"({"a": [1, 2.5, null, "\u00e9"]} )")).ok());
  EXPECT_TRUE(CheckJson(B("3")).ok());
  Status st = CheckJson(B(R"({"a": 1,})"));
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(CheckJson(B("{} {}")).ok());
  EXPECT_FALSE(CheckJson(B("\"\xff\"")).ok());
  // A byte-order mark before the value: nlohmann skips it, json.loads refuses it.
  Status bom = CheckJson(B("\xef\xbb\xbf{}"));
  EXPECT_FALSE(bom.ok());
  EXPECT_NE(bom.message().find("byte-order mark"), std::string::npos) << bom.message();
  EXPECT_FALSE(CheckJson(B(R"("\ud800")")).ok());  // a lone surrogate escape: not a Unicode string
  // A NUL byte: nlohmann's lexer ends the input there, json.loads does not.
  Status nul = CheckJson(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("3\0\0"), 3));
  EXPECT_FALSE(nul.ok());
  EXPECT_NE(nul.message().find("NUL byte at offset 1"), std::string::npos) << nul.message();
}

}  // namespace
}  // namespace stoker
