// io: backoff bounds, S3 URL/escaping/ini parsing, the posix reader and
// OpenReader's dispatch (the HTTP paths run against real servers in
// tests/python/test_remote.py).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/file.h"
#include "io/backoff.h"
#include "io/posix_reader.h"
#include "io/reader.h"
#include "io/s3.h"

namespace stoker {
namespace {

TEST(BackoffTest, DoublesFromBaseJitteredIntoTheUpperHalfAndCapped) {
  EXPECT_EQ(BackoffMs(1, 100, 5000, 0.0), 50u);
  EXPECT_EQ(BackoffMs(1, 100, 5000, 0.999), 99u);
  EXPECT_EQ(BackoffMs(2, 100, 5000, 0.0), 100u);
  EXPECT_EQ(BackoffMs(3, 100, 5000, 0.0), 200u);
  for (int retry = 1; retry < 80; ++retry) {
    for (double u : {0.0, 0.5, 0.9999}) {
      uint64_t d = BackoffMs(retry, 100, 5000, u);
      EXPECT_LE(d, 5000u);
      EXPECT_GE(d, retry >= 7 ? 2500u : 50u);
    }
  }
}

TEST(S3Test, ParsesBucketAndKey) {
  auto u = ParseS3Url("s3://bkt/a/b/shard-000001.tar");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->bucket, "bkt");
  EXPECT_EQ(u->key, "a/b/shard-000001.tar");
  EXPECT_FALSE(ParseS3Url("s3:///key").ok());
  EXPECT_FALSE(ParseS3Url("http://x/y").ok());
}

TEST(S3Test, EscapesAllButUnreserved) {
  EXPECT_EQ(UriEscape("a b/c+d~e.tar", true), "a%20b/c%2Bd~e.tar");
  EXPECT_EQ(UriEscape("a/b", false), "a%2Fb");
}

TEST(S3Test, ReadsIniSections) {
  const std::string text =
      "[default]\naws_access_key_id = AK\naws_secret_access_key=SK\n\n[profile dev]\nregion = eu-west-1\n# c\n";
  auto d = ReadAwsIniSection(text, "default");
  EXPECT_EQ(d["aws_access_key_id"], "AK");
  EXPECT_EQ(d["aws_secret_access_key"], "SK");
  EXPECT_EQ(ReadAwsIniSection(text, "profile dev")["region"], "eu-west-1");
  EXPECT_TRUE(ReadAwsIniSection(text, "nope").empty());
}

TEST(S3Test, PathStyleWithAnEndpointAndSignedWithCredentials) {
  setenv("AWS_ACCESS_KEY_ID", "AK", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
  setenv("AWS_SESSION_TOKEN", "TOK", 1);
  setenv("AWS_REGION", "eu-central-1", 1);
  IoOptions o;
  o.s3_endpoint = "http://127.0.0.1:9000/";
  auto t = S3Target("s3://bkt/dir/x y.tar", o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->url, "http://127.0.0.1:9000/bkt/dir/x%20y.tar");
  EXPECT_EQ(t->sigv4, "aws:amz:eu-central-1:s3");
  EXPECT_EQ(t->userpwd, "AK:SK");
  EXPECT_EQ(t->token, "TOK");
  o.s3_endpoint.clear();
  auto v = S3Target("s3://bkt/k", o);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->url, "https://bkt.s3.eu-central-1.amazonaws.com/k");
}

TEST(PosixReaderTest, ReadsAndReportsShortReads) {
  const std::string path = std::filesystem::temp_directory_path() / "stoker_reader_test.bin";
  const std::string data = "0123456789";
  ASSERT_TRUE(WriteWholeFile(path, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}).ok());
  auto r = OpenReader(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)->remote());
  EXPECT_EQ((*r)->Size(), 10u);
  EXPECT_EQ((*r)->Name(), path);
  std::vector<uint8_t> buf(4);
  ASSERT_TRUE((*r)->PRead(3, buf).ok());
  EXPECT_EQ(std::string(buf.begin(), buf.end()), "3456");
  Status st = (*r)->PRead(8, buf);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos);
  EXPECT_EQ(OpenReader(path + ".missing").status().code(), StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(ReaderTest, RecognizesRemoteUrls) {
  EXPECT_TRUE(IsRemoteUrl("s3://b/k"));
  EXPECT_TRUE(IsRemoteUrl("http://h/x"));
  EXPECT_TRUE(IsRemoteUrl("https://h/x"));
  EXPECT_FALSE(IsRemoteUrl("/data/x.tar"));
  EXPECT_FALSE(IsRemoteUrl("s3.tar"));
}

TEST(ReaderTest, UnreachableServerFailsWithUrlAttemptsAndElapsed) {
  IoOptions o;
  o.attempts = 3;
  o.timeout_ms = 500;
  o.backoff_ms = 1;
  o.backoff_max_ms = 2;
  SetDefaultIoOptions(o);
  auto r = OpenReader("http://127.0.0.1:1/none.tar");  // port 1: refused
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("http://127.0.0.1:1/none.tar"), std::string::npos) << m;
  EXPECT_NE(m.find("3 attempts"), std::string::npos) << m;
  EXPECT_NE(m.find(" s;"), std::string::npos) << m;
}

}  // namespace
}  // namespace stoker
