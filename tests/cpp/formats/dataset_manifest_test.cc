// Tests for formats/dataset_manifest: the written file (its schema and
// relative paths), reading it back from a path and from a URL served on
// loopback, how shard paths resolve, and each malformed manifest's message.
#include "formats/dataset_manifest.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include <nlohmann/json.hpp>

#include "formats/tar_bytes.h"
#include "io/loopback_server.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileBytes;
using testing::TempPath;
using testing::WriteFile;

ShardSummary Shard(std::string path, uint64_t bytes, uint32_t samples, uint64_t sample_bytes, uint64_t max) {
  return {std::move(path), bytes, samples, sample_bytes, max};
}

// A fresh directory for one test.
std::string MakeDir(const std::string& name) {
  const std::string dir = TempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(DatasetManifestTest, RoundTripWritesPathsUnderItsFolderRelative) {
  const std::string dir = MakeDir("manifest_roundtrip");
  DatasetManifest m;
  m.key_rule = KeyRule::kUnderscoreSuffix;
  m.shards = {Shard(dir + "/shard-000000.tar", 10240, 3, 6000, 2560),
              Shard(dir + "/sub/../sub/shard-000001.tar", 5120, 1, 2048, 2048),
              Shard("/elsewhere/x.tar", 1024, 0, 0, 0),
              Shard("s3://bucket/p/y.tar", 1 << 20, 4'000'000'000u, 900'000, 512)};
  const std::string path = dir + "/" + kManifestName;
  ASSERT_TRUE(WriteManifest(m, path).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const nlohmann::json doc = nlohmann::json::parse(ReadFileBytes(path));
  EXPECT_EQ(doc["format"], "stoker-manifest");
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["key_rule"], "underscore");  // as the sidecars spell it
  EXPECT_EQ(doc["samples"], 4'000'000'004ull);
  ASSERT_EQ(doc["shards"].size(), 4u);
  EXPECT_EQ(doc["shards"][0],
            (nlohmann::json{{"path", "shard-000000.tar"}, {"bytes", 10240}, {"samples", 3}, {"sample_bytes", 6000},
                            {"max_sample_bytes", 2560}}));
  EXPECT_EQ(doc["shards"][1]["path"], "sub/shard-000001.tar");
  EXPECT_EQ(doc["shards"][2]["path"], "/elsewhere/x.tar");
  EXPECT_EQ(doc["shards"][3]["path"], "s3://bucket/p/y.tar");

  Result<DatasetManifest> back = ReadManifest(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key_rule, KeyRule::kUnderscoreSuffix);
  ASSERT_EQ(back->shards.size(), 4u);
  EXPECT_EQ(back->shards[0].path, dir + "/shard-000000.tar");
  EXPECT_EQ(back->shards[1].path, dir + "/sub/shard-000001.tar");
  EXPECT_EQ(back->shards[2].path, "/elsewhere/x.tar");
  EXPECT_EQ(back->shards[3].path, "s3://bucket/p/y.tar");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(back->shards[i].bytes, m.shards[i].bytes) << i;
    EXPECT_EQ(back->shards[i].samples, m.shards[i].samples) << i;
    EXPECT_EQ(back->shards[i].sample_bytes, m.shards[i].sample_bytes) << i;
    EXPECT_EQ(back->shards[i].max_sample_bytes, m.shards[i].max_sample_bytes) << i;
  }
  EXPECT_EQ(TotalSamples(*back), 4'000'000'004ull);
  fs::remove_all(dir);
}

TEST(DatasetManifestTest, ARelativeShardPathIsWrittenFromTheManifestsFolder) {
  // The writer is given paths relative to the working directory; the file
  // names them from its own folder, so it moves with the shards.
  const std::string dir = MakeDir("manifest_cwd");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  fs::create_directories("data");
  DatasetManifest m;
  m.shards = {Shard("data/a.tar", 2048, 1, 1024, 1024)};
  const Status written = WriteManifest(m, "data/m.json");
  fs::current_path(cwd);
  ASSERT_TRUE(written.ok()) << written.ToString();
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/data/m.json"))["shards"][0]["path"], "a.tar");
  fs::remove_all(dir);
}

TEST(DatasetManifestTest, PathsResolveAgainstTheManifestsFolder) {
  const std::string dir = MakeDir("manifest_resolve");
  WriteFile(dir + "/m.json", R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 5,
    "shards": [
      {"path": "a.tar", "bytes": 10, "samples": 1, "sample_bytes": 1, "max_sample_bytes": 1},
      {"path": "sub/b.tar", "bytes": 10, "samples": 1, "sample_bytes": 1, "max_sample_bytes": 1},
      {"path": "/abs/c.tar", "bytes": 10, "samples": 1, "sample_bytes": 1, "max_sample_bytes": 1},
      {"path": "https://cdn.example/d.tar?token=t", "bytes": 10, "samples": 1, "sample_bytes": 1, "max_sample_bytes": 1},
      {"path": "s3://bucket/e.tar", "bytes": 10, "samples": 1, "sample_bytes": 1, "max_sample_bytes": 1}],
    "comment": "keys this version does not know are ignored"})");
  Result<DatasetManifest> m = ReadManifest(dir + "/m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<std::string> paths;
  for (const ShardSummary& s : m->shards) paths.push_back(s.path);
  EXPECT_EQ(paths, (std::vector<std::string>{dir + "/a.tar", dir + "/sub/b.tar", "/abs/c.tar",
                                             "https://cdn.example/d.tar?token=t", "s3://bucket/e.tar"}));
  fs::remove_all(dir);
}

// Serves one body to every GET, and keeps the request targets it was asked for.
class OneObjectServer {
 public:
  explicit OneObjectServer(std::string body) : body_(std::move(body)) {}
  std::string url(const std::string& target) const { return server_.url(target); }
  std::vector<std::string> targets() {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }

 private:
  void Answer(int c) {
    const std::string req = test_data::ReadRequestHead(c);
    const size_t sp = req.find(' ');
    {
      std::lock_guard<std::mutex> lock(mu_);
      targets_.push_back(req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1));
    }
    const std::string out = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) +
                            "\r\nConnection: close\r\n\r\n" + body_;
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = ::send(c, out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  const std::string body_;
  std::mutex mu_;
  std::vector<std::string> targets_;  // guarded by mu_
  test_data::LoopbackServer server_{[this](int c) {  // last: serves at once
    Answer(c);
    ::close(c);
  }};
};

TEST(DatasetManifestTest, AUrlManifestIsOneGetWithItsQueryAndItsShardsResolveWithout) {
  OneObjectServer server(R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 3,
    "shards": [
      {"path": "shard-000000.tar", "bytes": 4096, "samples": 2, "sample_bytes": 3072, "max_sample_bytes": 2048},
      {"path": "more/shard-000001.tar?X-Amz-Signature=own", "bytes": 2048, "samples": 1, "sample_bytes": 1024,
       "max_sample_bytes": 1024},
      {"path": "https://other.example/z.tar", "bytes": 0, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0}]})");
  const std::string url = server.url("data/stoker-manifest.json?X-Amz-Signature=abc&X-Amz-Expires=60");
  ASSERT_TRUE(IsManifestPath(url));
  Result<DatasetManifest> m = ReadManifest(url);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(server.targets(), (std::vector<std::string>{"/data/stoker-manifest.json?X-Amz-Signature=abc&X-Amz-Expires=60"}));
  ASSERT_EQ(m->shards.size(), 3u);
  EXPECT_EQ(m->shards[0].path, server.url("data/shard-000000.tar"));  // the manifest's query is its own
  EXPECT_EQ(m->shards[1].path, server.url("data/more/shard-000001.tar?X-Amz-Signature=own"));
  EXPECT_EQ(m->shards[2].path, "https://other.example/z.tar");
  EXPECT_EQ(m->shards[0].samples, 2u);
  EXPECT_EQ(TotalSamples(*m), 3u);
}

TEST(DatasetManifestTest, IsManifestPathLooksAtThePathBeforeAQuery) {
  EXPECT_TRUE(IsManifestPath("stoker-manifest.json"));
  EXPECT_TRUE(IsManifestPath("/d/x.json"));
  EXPECT_TRUE(IsManifestPath("https://h/d/stoker-manifest.json?sig=1"));
  EXPECT_TRUE(IsManifestPath("s3://b/d/stoker-manifest.json"));
  EXPECT_FALSE(IsManifestPath("/d/shard-000000.tar"));
  EXPECT_FALSE(IsManifestPath("https://h/d/a.tar?f=x.json"));
  EXPECT_FALSE(IsManifestPath("/d/{000..009}.tar"));
}

TEST(DatasetManifestTest, SummaryOfAnIndexCountsItsSamplesAndTheirBytes) {
  ShardIndex index;
  index.shard_path = "/d/a.tar";
  index.shard_size = 10240;
  std::vector<SampleEntry> samples = {{"a", {{"jpg", "a.jpg", 512, 100}}, 0, 612},
                                      {"b", {{"jpg", "b.jpg", 1536, 1900}}, 1024, 3436}};
  index.samples = SampleTable(samples);
  const ShardSummary s = SummaryOf(index);
  EXPECT_EQ(s.path, "/d/a.tar");
  EXPECT_EQ(s.bytes, 10240u);
  EXPECT_EQ(s.samples, 2u);
  EXPECT_EQ(s.sample_bytes, 612u + 2412u);
  EXPECT_EQ(s.max_sample_bytes, 2412u);
}

// A manifest whose one shard entry is `shard` (a JSON object's body) and whose total is `total`.
std::string WithShard(const std::string& shard, const std::string& total = "2") {
  return R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": )" + total +
         R"(, "shards": [{"path": "a.tar", "bytes": 4096, "samples": 2, "sample_bytes": 2048, "max_sample_bytes": 1024},
            {)" + shard + "}]}";
}
const char kGood[] = R"("path": "b.tar", "bytes": 4096, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)";

struct Malformed {
  const char* what;
  std::string text;
  std::vector<std::string> says;  // each in the message, besides the manifest's path
  StatusCode code = StatusCode::kDataLoss;
};

TEST(DatasetManifestTest, EachMalformedManifestSaysWhatAndWhere) {
  const std::string path = TempPath("manifest_bad.json");
  const std::vector<Malformed> cases = {
      {"not JSON", "{\"format\": \"stoker-manifest\", ", {"invalid JSON"}},
      {"an array", "[1, 2]", {"top level is array"}},
      {"no format", R"({"version": 1})", {"\"format\" is missing"}},
      {"another format", R"({"format": "stoker-index", "version": 1})", {"\"format\" is 'stoker-index'"}},
      {"a newer version", R"({"format": "stoker-manifest", "version": 2})", {"manifest version 2, this build reads 1"},
       StatusCode::kFailedPrecondition},
      {"version as text", R"({"format": "stoker-manifest", "version": "1"})", {"\"version\" is string (\"1\")"}},
      {"no key rule", R"({"format": "stoker-manifest", "version": 1, "samples": 0, "shards": []})",
       {"\"key_rule\" is missing"}},
      {"a long string where a count goes",
       R"({"format": "stoker-manifest", "version": "xééééééééééééééééééééééé"})",
       {"\"version\" is string (\"x\xC3\xA9\xC3\xA9", "\xC3\xA9...), not a count"}},  // cut between characters
      {"an unknown key rule", R"({"format": "stoker-manifest", "version": 1, "key_rule": "dots"})",
       {"\"key_rule\"", "dots"}},
      {"no total", R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "shards": []})",
       {"\"samples\" is missing"}},
      {"no shards", R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 0})",
       {"\"shards\" is missing"}},
      {"shards not a list",
       R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 0, "shards": {}})",
       {"\"shards\" is object, not an array"}},
      {"an empty list",
       R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 0, "shards": []})",
       {"lists no shard"}},
      {"an entry not an object",
       R"({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset", "samples": 0, "shards": ["a.tar"]})",
       {"shards[0]: is string (\"a.tar\"), not an object"}},
      {"no path", WithShard(R"("bytes": 1, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1]: \"path\" is missing"}},
      {"an empty path", WithShard(R"("path": "", "bytes": 1, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1]: \"path\" is empty"}},
      {"a path not a string",
       WithShard(R"("path": 7, "bytes": 1, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1]: \"path\" is number, not a string"}},
      {"a scheme not read",
       WithShard(R"("path": "gs://b/x.tar", "bytes": 1, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1]: ", "gs://"}},
      {"no bytes", WithShard(R"("path": "b.tar", "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1] 'b.tar': \"bytes\" is missing"}},
      {"no samples", WithShard(R"("path": "b.tar", "bytes": 1, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1] 'b.tar': \"samples\" is missing"}},
      {"negative samples",
       WithShard(R"("path": "b.tar", "bytes": 1, "samples": -3, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1] 'b.tar': \"samples\" is negative (-3), not a count"}},
      {"fractional samples",
       WithShard(R"("path": "b.tar", "bytes": 1, "samples": 1.5, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1] 'b.tar': \"samples\" is a fraction (1.5), not a count"}},
      {"samples as text",
       WithShard(R"("path": "b.tar", "bytes": 1, "samples": "3", "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"\"samples\" is string (\"3\"), not a count"}},
      {"samples past 32 bits",
       WithShard(R"("path": "b.tar", "bytes": 1, "samples": 4294967296, "sample_bytes": 0, "max_sample_bytes": 0)",
                 "4294967298"),
       {"shards[1] 'b.tar': \"samples\" is 4294967296, over the most 4294967295"}},
      {"no sample bytes", WithShard(R"("path": "b.tar", "bytes": 1, "samples": 0, "max_sample_bytes": 0)"),
       {"\"sample_bytes\" is missing"}},
      {"no max sample bytes", WithShard(R"("path": "b.tar", "bytes": 1, "samples": 0, "sample_bytes": 0)"),
       {"\"max_sample_bytes\" is missing"}},
      {"samples larger than the shard",
       WithShard(R"("path": "b.tar", "bytes": 100, "samples": 0, "sample_bytes": 200, "max_sample_bytes": 200)"),
       {"shards[1] 'b.tar': \"sample_bytes\" 200 exceeds the shard's \"bytes\" 100"}},
      {"a largest sample larger than all",
       WithShard(R"("path": "b.tar", "bytes": 900, "samples": 1, "sample_bytes": 100, "max_sample_bytes": 200)", "3"),
       {"shards[1] 'b.tar': \"max_sample_bytes\" 200 does not fit 1 samples of 100 bytes in all"}},
      {"a largest sample too small for all",
       WithShard(R"("path": "b.tar", "bytes": 900, "samples": 2, "sample_bytes": 300, "max_sample_bytes": 100)", "4"),
       {"\"max_sample_bytes\" 100 does not fit 2 samples of 300 bytes in all"}},
      {"bytes but no samples",
       WithShard(R"("path": "b.tar", "bytes": 900, "samples": 0, "sample_bytes": 300, "max_sample_bytes": 300)"),
       {"does not fit 0 samples of 300 bytes"}},
      {"the same path twice",
       WithShard(R"("path": "a.tar", "bytes": 4096, "samples": 0, "sample_bytes": 0, "max_sample_bytes": 0)"),
       {"shards[1] '", "a.tar' is listed twice (also shards[0])"}},
      {"a total that is not the sum", WithShard(kGood, "3"),
       {"\"samples\" is 3 but the shards hold 2 (an entry was cut or edited)"}},
      {"a negative total", WithShard(kGood, "-2"), {"\"samples\" is negative (-2), not a count"}},
  };
  for (const Malformed& c : cases) {
    WriteFile(path, c.text);
    Result<DatasetManifest> m = ReadManifest(path);
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_EQ(m.status().code(), c.code) << c.what << ": " << m.status().ToString();
    const std::string& msg = m.status().message();
    EXPECT_NE(msg.find(path), std::string::npos) << c.what << ": " << msg;
    for (const std::string& s : c.says) EXPECT_NE(msg.find(s), std::string::npos) << c.what << ": " << msg;
  }
  ASSERT_TRUE(ReadManifest(TempPath("manifest_absent.json")).status().code() == StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(DatasetManifestTest, WritingReportsWhatItCannotWrite) {
  DatasetManifest m;
  m.shards = {Shard("/d/a\xff.tar", 1, 0, 0, 0)};
  Status s = WriteManifest(m, TempPath("manifest_utf8.json"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not UTF-8"), std::string::npos) << s.ToString();
  m.shards = {Shard("/d/a.tar", 1, 0, 0, 0)};
  s = WriteManifest(m, TempPath("no_such_dir") + "/m.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no_such_dir"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace stoker
