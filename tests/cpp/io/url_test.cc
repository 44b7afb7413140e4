// io/url.h and io/hf.h: a query taken literally, sidecar names, redaction,
// the schemes read, hf:// addressing (the HTTP side runs against loopback
// servers in tests/python/test_urls.py).
#include <gtest/gtest.h>

#include "io/hf.h"
#include "io/reader.h"
#include "io/url.h"

namespace stoker {
namespace {

const std::string kDots(kRedacted);

TEST(UrlTest, SplitsAnHttpUrlAtItsQuery) {
  UrlParts p = SplitQuery("https://h:8/d/a.tar?token=x/y&b=1");
  EXPECT_EQ(p.path, "https://h:8/d/a.tar");
  EXPECT_EQ(p.suffix, "?token=x/y&b=1");
  p = SplitQuery("http://h/a.tar#frag");
  EXPECT_EQ(p.path, "http://h/a.tar");
  EXPECT_EQ(p.suffix, "#frag");
  // A local path, an S3 key or an hf:// path has no query: '?' is a character or a wildcard.
  EXPECT_EQ(SplitQuery("hf://datasets/o/n/a-?.tar").path, "hf://datasets/o/n/a-?.tar");
  EXPECT_EQ(SplitQuery("/data/a?.tar").path, "/data/a?.tar");
  EXPECT_EQ(SplitQuery("s3://b/k?x").path, "s3://b/k?x");
}

TEST(UrlTest, SidecarsAreNamedFromThePathWithTheQueryKept) {
  EXPECT_EQ(WithSuffix("https://h/a.tar?token=x", ".idx"), "https://h/a.tar.idx?token=x");
  EXPECT_EQ(WithSuffix("https://h/a.tar", ".idx"), "https://h/a.tar.idx");
  EXPECT_EQ(WithSuffix("/d/a?.tar", ".idx"), "/d/a?.tar.idx");
  EXPECT_EQ(WithSuffix("http://h/p/data?sig=1", ".bin"), "http://h/p/data.bin?sig=1");
  EXPECT_TRUE(PathEndsWith("https://h/a.tar.gz?X-Amz-Signature=ab.gz", ".gz"));
  EXPECT_FALSE(PathEndsWith("https://h/a.tar?name=b.gz", ".gz"));
}

TEST(UrlTest, RedactsEveryQueryValueAndPassword) {
  EXPECT_EQ(RedactUrl("https://b.s3.amazonaws.com/a.tar?X-Amz-Algorithm=AWS4&X-Amz-Signature=deadbeef"),
            "https://b.s3.amazonaws.com/a.tar?X-Amz-Algorithm=" + kDots + "&X-Amz-Signature=" + kDots);
  EXPECT_EQ(RedactUrl("http://h/a.tar?secret"), "http://h/a.tar?" + kDots);
  EXPECT_EQ(RedactUrl("http://h/a.tar?a=&b"), "http://h/a.tar?a=&" + kDots);
  EXPECT_EQ(RedactUrl("http://user:pw@h:1/a.tar"), "http://user:" + kDots + "@h:1/a.tar");
  EXPECT_EQ(RedactUrl("http://h/a.tar?t=1#k"), "http://h/a.tar?t=" + kDots + "#" + kDots);
  EXPECT_EQ(RedactUrl("http://h/a.tar"), "http://h/a.tar");
  EXPECT_EQ(RedactUrl("/local/a.tar"), "/local/a.tar");
  const std::string once = RedactUrl("http://h/a?token=abc");
  EXPECT_EQ(RedactUrl(once), once);  // redacting twice changes nothing
}

TEST(UrlTest, RedactsEveryUrlInsideAText) {
  const std::string text =
      "shard 'http://127.0.0.1:9/a.tar?token=s3cr3t': HTTP 403 on GET (not retried); "
      "also https://h/b.tar?sig=xyz&e=1, then (http://h/c.tar?k=v). /tmp/x?y=z stays";
  const std::string out = RedactUrls(text);
  EXPECT_EQ(out.find("s3cr3t"), std::string::npos) << out;
  EXPECT_EQ(out.find("xyz"), std::string::npos) << out;
  EXPECT_EQ(out.find("k=v"), std::string::npos) << out;
  EXPECT_NE(out.find("'http://127.0.0.1:9/a.tar?token=" + kDots + "': HTTP 403 on GET (not retried); "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("(http://h/c.tar?k=" + kDots + ")."), std::string::npos) << out;
  EXPECT_NE(out.find("/tmp/x?y=z stays"), std::string::npos) << out;  // a local path is no URL
  EXPECT_EQ(RedactUrls("no url here"), "no url here");
}

TEST(UrlTest, UnknownSchemesNameTheOnesRead) {
  EXPECT_TRUE(CheckScheme("/d/a.tar").ok());
  EXPECT_TRUE(CheckScheme("https://h/a.tar").ok());
  EXPECT_TRUE(CheckScheme("hf://datasets/o/n/a.tar").ok());
  EXPECT_TRUE(CheckScheme("s3://b/a.tar").ok());
  EXPECT_TRUE(CheckScheme("dir/with://odd.tar").ok());  // a path, not a scheme
  for (const char* url : {"gs://b/a.tar", "az://c/a.tar", "ftp://h/a.tar", "xyz://q"}) {
    Status st = CheckScheme(url);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(st.message().find("http://, https://, s3:// and hf://"), std::string::npos) << st.message();
  }
  EXPECT_NE(CheckScheme("gs://b/a.tar").message().find("s3_endpoint=\"https://storage.googleapis.com\""),
            std::string::npos);
  EXPECT_NE(CheckScheme("gs://b/a.tar").message().find("HMAC"), std::string::npos);
  EXPECT_EQ(CheckScheme("ftp://u:pw@h/a?t=1").message().find("pw"), std::string::npos);
  // Reading one is the same error, not "does not exist".
  auto r = OpenReader("gs://b/a.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadWholeObject("ftp://h/a.tar.idx").status().code(), StatusCode::kInvalidArgument);
}

TEST(HfTest, ParsesRepositoryRevisionAndPath) {
  auto u = ParseHfUrl("hf://datasets/org/name/data/shard-000.tar");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, "datasets");
  EXPECT_EQ(u->repo, "org/name");
  EXPECT_EQ(u->revision, "main");
  EXPECT_EQ(u->path, "data/shard-000.tar");
  EXPECT_EQ(u->prefix, "hf://datasets/org/name/");
  u = ParseHfUrl("hf://datasets/org/name@v1.0/a.tar");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->revision, "v1.0");
  EXPECT_EQ(u->prefix, "hf://datasets/org/name@v1.0/");
  u = ParseHfUrl("hf://datasets/org/name@refs/convert/parquet/x.parquet");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->revision, "refs/convert/parquet");
  EXPECT_EQ(u->path, "x.parquet");
  u = ParseHfUrl("hf://datasets/org/name@refs%2Fpr%2F3/x.tar");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->revision, "refs/pr/3");
  u = ParseHfUrl("hf://org/model/weights.bin");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, "models");
  EXPECT_EQ(u->prefix, "hf://org/model/");
  EXPECT_FALSE(ParseHfUrl("hf://datasets/org").ok());
}

TEST(HfTest, ReadsThroughTheResolveUrlWithTheTokenForTheHubOnly) {
  IoOptions o;
  o.hf_endpoint = "http://127.0.0.1:5/";
  o.hf_token = "hf_x";
  o.http_headers = {{"X-Extra", "1"}};
  auto t = HfTarget("hf://datasets/org/name@refs/pr/3/data/a b.tar", o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->url, "http://127.0.0.1:5/datasets/org/name/resolve/refs%2Fpr%2F3/data/a%20b.tar");
  EXPECT_EQ(t->name, "hf://datasets/org/name@refs/pr/3/data/a b.tar");
  EXPECT_EQ(t->headers, (std::vector<std::string>{"X-Extra: 1", "Authorization: Bearer hf_x"}));
  o.hf_token.clear();
  t = HfTarget("hf://org/model/w.bin", o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->url, "http://127.0.0.1:5/org/model/resolve/main/w.bin");
  EXPECT_EQ(t->headers, (std::vector<std::string>{"X-Extra: 1"}));
}

}  // namespace
}  // namespace stoker
