// io: backoff bounds, S3 URL/escaping/ini parsing, the posix reader and
// OpenReader's dispatch (the HTTP paths run against real servers in
// tests/python/test_remote.py).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/file.h"
#include "io/aws_credentials.h"
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
  ASSERT_NE(t->credentials, nullptr);  // signed with the chain's keys, fetched per attempt
  auto keys = t->credentials->Get();
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->key, "AK");
  EXPECT_EQ(keys->secret, "SK");
  EXPECT_EQ(keys->token, "TOK");
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

// Detoured reads: the detours' bytes land in their destinations, the rest in
// out, from one preadv (local) and from the default read-then-copy path alike.
class CopyingReader : public RandomAccessReader {
 public:
  explicit CopyingReader(const RandomAccessReader* inner) : inner_(inner) {}
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override { return inner_->ReadAt(offset, out); }
  uint64_t Size() const override { return inner_->Size(); }
  const std::string& Name() const override { return inner_->Name(); }

 private:
  const RandomAccessReader* inner_;
};

TEST(PosixReaderTest, DetouredReadPlacesEachPieceOnce) {
  const std::string path = ::testing::TempDir() + "/detour.bin";
  std::vector<uint8_t> content(100000);
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<uint8_t>(i * 7 + i / 251);
  {
    auto f = File::OpenWrite(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(content).ok());
  }
  auto posix = PosixReader::Open(path);
  ASSERT_TRUE(posix.ok());
  CopyingReader copying(posix->get());
  for (const RandomAccessReader* r : {static_cast<const RandomAccessReader*>(posix->get()),
                                      static_cast<const RandomAccessReader*>(&copying)}) {
    const uint64_t offset = 1234;
    std::vector<uint8_t> out(60000, 0), a(5000, 0), b(30000, 0);
    // One detour at the very start, one in the middle; the gap between them and the tail go to out.
    std::vector<RandomAccessReader::Detour> detours = {{0, a}, {20000, b}};
    ASSERT_TRUE(r->PReadDetoured(offset, out, detours).ok());
    EXPECT_TRUE(std::equal(a.begin(), a.end(), content.begin() + offset));
    EXPECT_TRUE(std::equal(b.begin(), b.end(), content.begin() + offset + 20000));
    EXPECT_TRUE(std::equal(out.begin() + 5000, out.begin() + 20000, content.begin() + offset + 5000));
    EXPECT_TRUE(std::equal(out.begin() + 50000, out.end(), content.begin() + offset + 50000));
    // Past the end: a short read is an error, as PRead's.
    std::vector<uint8_t> big(200000);
    std::vector<RandomAccessReader::Detour> one = {{10, std::span<uint8_t>(a)}};
    EXPECT_FALSE(r->PReadDetoured(0, big, one).ok());
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace stoker
