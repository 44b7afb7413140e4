// tests/cpp/io/aws_credentials_test.cc — the credential chain: the parsers of
// each source's answer, the refresh schedule under an injected clock, the
// chain's order with environment variables and temporary config files, and
// the metadata endpoints (IMDSv2, container) against a loopback HTTP server.
#include "io/aws_credentials.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "io/aws_sources.h"
#include "io/loopback_server.h"

namespace stoker {
namespace {

using namespace std::chrono_literals;
using SystemClock = std::chrono::system_clock;

SystemClock::time_point At(const char* iso) { return aws::ParseIso8601(iso).value(); }

TEST(AwsParse, Iso8601) {
  auto t = At("2026-11-25T13:00:00Z");
  EXPECT_EQ(SystemClock::to_time_t(t), 1795611600);
  EXPECT_EQ(At("2026-11-25T13:00:00.500Z") - t, 500ms);
  EXPECT_EQ(At("2026-11-25T14:30:00+01:30"), t);
  EXPECT_EQ(At("2026-11-25T12:00:00-01:00"), t);
  EXPECT_EQ(At("2026-11-25T13:00:00"), t);
  EXPECT_EQ(At("2999-01-01T00:00:00Z"), SystemClock::time_point::max());  // past the clock's range
  EXPECT_FALSE(aws::ParseIso8601("tomorrow").ok());
  EXPECT_FALSE(aws::ParseIso8601("2026-11-25T13:00:00 junk").ok());
}

TEST(AwsParse, StsAnswerAndRefusal) {
  const std::string ok = R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <AssumedRoleUser><Arn>arn:aws:sts::123:assumed-role/r/s</Arn></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
      <SecretAccessKey>se/cr+et&amp;</SecretAccessKey>
      <SessionToken>tok==</SessionToken>
      <Expiration>2026-11-25T13:00:00Z</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>)";
  auto c = aws::ParseStsResponse(ok);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key, "ASIAEXAMPLE");
  EXPECT_EQ(c->secret, "se/cr+et&");
  EXPECT_EQ(c->token, "tok==");
  EXPECT_EQ(c->expires, At("2026-11-25T13:00:00Z"));

  auto refused = aws::ParseStsResponse(
      "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform "
      "sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("AccessDenied"), std::string::npos);
  EXPECT_NE(refused.status().message().find("Not authorized"), std::string::npos);
  EXPECT_FALSE(aws::ParseStsResponse("<AssumeRoleResponse/>").ok());
}

TEST(AwsParse, MetadataAndProcessJson) {
  auto c = aws::ParseMetadataJson(R"({"Code":"Success","AccessKeyId":"AK","SecretAccessKey":"SK",
                                      "Token":"T","Expiration":"2026-11-25T13:00:00Z"})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key + c->secret + c->token, "AKSKT");
  EXPECT_EQ(c->expires, At("2026-11-25T13:00:00Z"));
  EXPECT_FALSE(aws::ParseMetadataJson(R"({"Code":"Failed","Message":"no role"})").ok());
  EXPECT_FALSE(aws::ParseMetadataJson("not json").ok());
  EXPECT_FALSE(aws::ParseMetadataJson(R"({"AccessKeyId":"AK"})").ok());

  auto p = aws::ParseProcessJson(R"({"Version":1,"AccessKeyId":"AK","SecretAccessKey":"SK"})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->expires, SystemClock::time_point::max());  // long-term keys
  EXPECT_EQ(p->token, "");
  p = aws::ParseProcessJson(R"({"Version":1,"AccessKeyId":"AK","SecretAccessKey":"SK","SessionToken":"ST",
                                "Expiration":"2026-11-25T13:00:00Z"})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->token, "ST");
  EXPECT_FALSE(aws::ParseProcessJson(R"({"Version":2,"AccessKeyId":"AK","SecretAccessKey":"SK"})").ok());
}

TEST(AwsRefresh, MarginsScaleWithLifetime) {
  EXPECT_EQ(MarginsFor(60s).advisory, 15s);
  EXPECT_EQ(MarginsFor(60s).mandatory, 7500ms);
  EXPECT_EQ(MarginsFor(12h).advisory, 15min);  // botocore's
  EXPECT_EQ(MarginsFor(12h).mandatory, 10min);
}

// A source whose credentials live `lifetime` on a clock the test moves.
struct FakeSource {
  std::mutex mu;
  SystemClock::time_point now = At("2026-01-01T00:00:00Z");
  SystemClock::duration lifetime = 60s;
  int calls = 0;
  bool fail = false;
  std::chrono::milliseconds delay{0};
  // While held, a fetch past the first waits in the source until Release():
  // a refresh the test can keep in flight as long as it looks.
  std::condition_variable cv;
  bool hold = false;
  int fetching = 0;  // fetches waiting on the hold

  CredentialFetch Fetch() {
    return [this]() -> Result<AwsCredentials> {
      std::this_thread::sleep_for(delay);
      std::unique_lock lock(mu);
      if (hold && calls > 0) {
        ++fetching;
        cv.notify_all();
        cv.wait(lock, [&] { return !hold; });
        --fetching;
      }
      ++calls;
      if (fail) return IoError("fake source: refused");
      return AwsCredentials{"AK" + std::to_string(calls), "SK", "T" + std::to_string(calls), now + lifetime, "fake"};
    };
  }
  WallClock Clock() {
    return [this] {
      std::lock_guard lock(mu);
      return now;
    };
  }
  void Advance(SystemClock::duration d) {
    std::lock_guard lock(mu);
    now += d;
  }
};

TEST(AwsRefresh, FetchesOnlyInsideTheMargin) {
  FakeSource src;
  auto p = NewRefreshingProvider(src.Fetch(), src.Clock());
  EXPECT_EQ(p->Get()->key, "AK1");
  for (int i = 0; i < 44; ++i) {  // 60-s credentials: 45 s without a fetch
    src.Advance(1s);
    EXPECT_EQ(p->Get()->key, "AK1");
  }
  src.Advance(2s);  // 46 s: inside the 15-s margin
  EXPECT_EQ(p->Get()->key, "AK2");
  EXPECT_EQ(p->fetches(), 2);
  // Over 10 minutes, one Get a second: a fetch every 45 s, not per call.
  for (int i = 0; i < 600; ++i) {
    src.Advance(1s);
    ASSERT_TRUE(p->Get().ok());
  }
  EXPECT_GE(p->fetches(), 2 + 12);
  EXPECT_LE(p->fetches(), 2 + 14);
}

TEST(AwsRefresh, AFailedRefreshKeepsValidCredentialsAndRetriesLater) {
  FakeSource src;
  auto p = NewRefreshingProvider(src.Fetch(), src.Clock());
  ASSERT_EQ(p->Get()->key, "AK1");
  src.fail = true;
  src.Advance(50s);  // advisory window, still valid (10 s left)
  EXPECT_EQ(p->Get()->key, "AK1");
  EXPECT_EQ(src.calls, 2);
  EXPECT_EQ(p->Get()->key, "AK1");  // retried later, not on every call
  EXPECT_EQ(src.calls, 2);
  src.Advance(2s);  // past the retry pause (max(1 s, left/10))
  EXPECT_EQ(p->Get()->key, "AK1");
  EXPECT_EQ(src.calls, 3);
  src.Advance(10s);  // expired, the source still down: an error naming it
  auto r = p->Get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fake source"), std::string::npos);
  src.fail = false;
  EXPECT_EQ(p->Get()->key, "AK5");
}

TEST(AwsRefresh, InvalidateOnlyTheCredentialsSeen) {
  FakeSource src;
  auto p = NewRefreshingProvider(src.Fetch(), src.Clock());
  AwsCredentials first = p->Get().value();
  AwsCredentials other = first;
  other.token = "someone else's";
  p->Invalidate(other);
  EXPECT_EQ(p->Get()->key, "AK1");
  p->Invalidate(first);
  EXPECT_EQ(p->Get()->key, "AK2");
  p->Invalidate(first);  // a second refusal of the old ones: already replaced
  EXPECT_EQ(p->Get()->key, "AK2");
  EXPECT_EQ(p->fetches(), 2);
}

TEST(AwsRefresh, OneThreadRefreshesWhileTheOthersGoOn) {
  FakeSource src;
  auto p = NewRefreshingProvider(src.Fetch(), src.Clock());
  ASSERT_TRUE(p->Get().ok());
  {
    std::lock_guard lock(src.mu);
    src.hold = true;  // the refresh stays in flight until released below
  }
  src.Advance(50s);  // advisory window
  int done = 0, old = 0, ok = 0;  // guarded by src.mu
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto c = p->Get();
      std::lock_guard lock(src.mu);
      ++done;
      ok += c.ok();
      if (c.ok() && c->key == "AK1") ++old;
      src.cv.notify_all();
    });
  }
  {
    // Seven threads return while the eighth's refresh is held: they did not
    // wait for it. (Had they, none would return before the release; the
    // minute is only there so that such a failure ends.)
    std::unique_lock lock(src.mu);
    EXPECT_TRUE(src.cv.wait_for(lock, 60s, [&] { return done == 7 && src.fetching == 1; }))
        << done << " of 8 returned with the refresh held, " << src.fetching << " fetch(es) in flight";
    EXPECT_EQ(old, 7);
    src.hold = false;
    src.cv.notify_all();
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(src.calls, 2);  // one refresh for all eight
  EXPECT_EQ(old, 7);        // the refresher got the new ones
}

TEST(AwsRefresh, WithoutValidCredentialsCallersWaitForOneFetch) {
  FakeSource src;
  src.delay = 200ms;
  auto p = NewRefreshingProvider(src.Fetch(), src.Clock());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] { ok += p->Get().ok() && p->Get()->key == "AK1"; });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(src.calls, 1);
}

// ---- the chain, with its world set up in the environment and temp files ----

class ChainTest : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {
      "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
      "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
      "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
      "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
      "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
      "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_ENDPOINT_URL_STS",
      "AWS_ENDPOINT_URL"};

  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_aws_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    Set("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "credentials").string());
    Set("AWS_CONFIG_FILE", (dir_ / "config").string());
    Set("AWS_EC2_METADATA_DISABLED", "true");
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    std::filesystem::remove_all(dir_);
  }
  void Set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
  void Write(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  std::filesystem::path dir_;
  std::map<std::string, std::string> saved_;
};

TEST_F(ChainTest, NothingConfiguredIsUnsigned) {
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, nullptr);
}

TEST_F(ChainTest, EnvironmentWinsOverTheProfile) {
  Write("credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
  Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key, "ENVKEY");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  p = SharedCredentialChain({});  // another environment: resolved anew
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key, "FILEKEY");
  EXPECT_EQ((*p)->Get()->expires, SystemClock::time_point::max());
}

TEST_F(ChainTest, AProfileInTheSettingsWinsOverTheEnvironment) {
  Write("credentials", "[job]\naws_access_key_id = JOBKEY\naws_secret_access_key = S\n");
  Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto p = SharedCredentialChain({"job", ""});
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key, "JOBKEY");
  Set("AWS_PROFILE", "job");  // from the environment: the environment's keys still win (botocore)
  p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key, "ENVKEY");
}

TEST_F(ChainTest, OneProviderPerSettings) {
  Write("credentials", "[default]\naws_access_key_id = K\naws_secret_access_key = S\n"
                       "[other]\naws_access_key_id = K2\naws_secret_access_key = S2\n");
  auto a = SharedCredentialChain({});
  auto b = SharedCredentialChain({});
  auto c = SharedCredentialChain({"other", ""});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ((*c)->Get()->key, "K2");
}

TEST_F(ChainTest, ProfileBeforeWebIdentity) {
  Write("credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = S\n");
  Set("AWS_WEB_IDENTITY_TOKEN_FILE", (dir_ / "missing-token").string());
  Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/r");
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok() && *p);
  EXPECT_EQ((*p)->Get()->key, "FILEKEY");
}

TEST_F(ChainTest, WebIdentityWithoutItsTokenFileIsAnErrorNamingIt) {
  Set("AWS_WEB_IDENTITY_TOKEN_FILE", (dir_ / "missing-token").string());
  Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/r");
  auto p = SharedCredentialChain({});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("web identity"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("missing-token"), std::string::npos);
}

TEST_F(ChainTest, CredentialProcessOfTheChosenProfile) {
  Write("config",
        "[profile job]\nregion = eu-west-3\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": \"PK\", "
        "\"SecretAccessKey\": \"PS\", \"SessionToken\": \"PT\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n");
  Set("AWS_PROFILE", "job");
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(*p);
  auto c = (*p)->Get();
  EXPECT_EQ(c->key, "PK");
  EXPECT_EQ(c->token, "PT");
  EXPECT_NE(c->source.find("job"), std::string::npos);
  EXPECT_EQ(ResolveAwsRegion({}), "eu-west-3");
  Set("AWS_REGION", "ap-south-1");
  EXPECT_EQ(ResolveAwsRegion({}), "ap-south-1");
  EXPECT_EQ(ResolveAwsRegion({"", "us-west-2"}), "us-west-2");
}

TEST_F(ChainTest, AFailingCredentialProcessNamesCommandProfileAndStderr) {
  Write("config", "[profile bad]\ncredential_process = echo vault is sealed >&2; exit 3\n");
  auto p = SharedCredentialChain({"bad", ""});
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("profile 'bad'"), std::string::npos) << m;
  EXPECT_NE(m.find("credential_process 'echo vault"), std::string::npos) << m;
  EXPECT_NE(m.find("exit status 3"), std::string::npos) << m;
  EXPECT_NE(m.find("vault is sealed"), std::string::npos) << m;
}

TEST_F(ChainTest, AnExplicitProfileThatDoesNotExistIsAnError) {
  auto p = SharedCredentialChain({"nosuch", ""});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'nosuch'"), std::string::npos);
}

TEST_F(ChainTest, RoleWithoutASourceIsAnError) {
  Write("config", "[profile r]\nrole_arn = arn:aws:iam::1:role/x\n");
  auto p = SharedCredentialChain({"r", ""});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("source_profile"), std::string::npos);
}

// A one-request-per-connection HTTP server on loopback: `answer` maps
// (method, path, headers) to (status, body); every request is recorded.
class MetadataServer {
 public:
  using Answer = std::function<std::pair<int, std::string>(const std::string& method, const std::string& path,
                                                           const std::string& headers)>;
  explicit MetadataServer(Answer answer)
      : answer_(std::move(answer)), server_([this](int fd) { Serve(fd); }) {}
  std::string url() const { return server_.url(""); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Serve(int fd) {
    const std::string in = test_data::ReadRequestHead(fd);
    const std::string method = in.substr(0, in.find(' '));
    const size_t p = in.find(' ') + 1;
    const std::string path = in.substr(p, in.find(' ', p) - p);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(method + " " + path);
    }
    auto [code, body] = answer_(method, path, in);
    std::string out = "HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n\r\n" + body;
    (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  Answer answer_;
  std::mutex mu_;
  std::vector<std::string> requests_;  // guarded by mu_
  test_data::LoopbackServer server_;   // last: serves from construction on
};

std::string Doc(const char* key) {
  return std::string(R"({"Code":"Success","AccessKeyId":")") + key +
         R"(","SecretAccessKey":"S","Token":"T","Expiration":"2999-01-01T00:00:00Z"})";
}

TEST_F(ChainTest, InstanceMetadataV2) {
  MetadataServer imds([](const std::string& m, const std::string& path, const std::string& h) {
    if (m == "PUT" && path == "/latest/api/token") {
      return std::pair{h.find("X-aws-ec2-metadata-token-ttl-seconds: 21600") != std::string::npos ? 200 : 400,
                       std::string("tok123")};
    }
    if (h.find("X-aws-ec2-metadata-token: tok123") == std::string::npos) return std::pair{401, std::string()};
    if (path == "/latest/meta-data/iam/security-credentials/") return std::pair{200, std::string("node-role\n")};
    if (path == "/latest/meta-data/iam/security-credentials/node-role") return std::pair{200, Doc("IMDSKEY")};
    return std::pair{404, std::string()};
  });
  unsetenv("AWS_EC2_METADATA_DISABLED");
  Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(*p);
  EXPECT_EQ((*p)->Get()->key, "IMDSKEY");
  EXPECT_NE((*p)->Get()->source.find("node-role"), std::string::npos);
  EXPECT_EQ(imds.requests().size(), 3u);
}

TEST_F(ChainTest, NoInstanceMetadataIsUnsignedAndFast) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // a port that nothing listens on
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  unsetenv("AWS_EC2_METADATA_DISABLED");
  Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:" + std::to_string(port));
  auto t0 = std::chrono::steady_clock::now();
  auto p = SharedCredentialChain({});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, nullptr);
}

TEST_F(ChainTest, AFirewallAnsweringForInstanceMetadataIsNoSource) {
  MetadataServer firewall([](const std::string&, const std::string&, const std::string&) {
    return std::pair{403, std::string("resolve_deny: denied destination")};
  });
  unsetenv("AWS_EC2_METADATA_DISABLED");
  Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", firewall.url());
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, nullptr);
  ASSERT_TRUE(SharedCredentialChain({}).ok());
  EXPECT_EQ(firewall.requests().size(), 2u);  // token PUT, v1 role GET; probed once
}

TEST_F(ChainTest, ContainerEndpointWithItsToken) {
  std::atomic<int> calls{0};
  MetadataServer ecs([&](const std::string&, const std::string& path, const std::string& h) {
    ++calls;
    if (h.find("Authorization: secret-token") == std::string::npos) return std::pair{401, std::string("no")};
    return std::pair{path == "/creds" ? 200 : 404, Doc("ECSKEY")};
  });
  Set("AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs.url() + "creds");
  Write("token", "secret-token\n");
  Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", (dir_ / "token").string());
  auto p = SharedCredentialChain({});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(*p);
  EXPECT_EQ((*p)->Get()->key, "ECSKEY");
  EXPECT_EQ(calls, 1);

  Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", (dir_ / "none").string());
  Set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong");
  unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  p = SharedCredentialChain({});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("container credentials"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("401"), std::string::npos) << p.status().message();
}

TEST_F(ChainTest, TheContainerTokenGoesOnlyToLoopbackOrTheAgent) {
  Set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://example.com/creds");
  Set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "secret");
  auto p = SharedCredentialChain({});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("example.com"), std::string::npos);
}

TEST_F(ChainTest, StsRefusalNamesSourceAndCode) {
  MetadataServer sts([](const std::string& m, const std::string&, const std::string& h) {
    return std::pair{403, std::string("<ErrorResponse><Error><Code>AccessDenied</Code><Message>Not authorized to "
                                      "perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>")};
  });
  Write("token", "eyJhbGciOi.jwt");
  Set("AWS_WEB_IDENTITY_TOKEN_FILE", (dir_ / "token").string());
  Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/trainer");
  Set("AWS_ENDPOINT_URL_STS", sts.url());
  auto p = SharedCredentialChain({});
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("web identity (role arn:aws:iam::123456789012:role/trainer"), std::string::npos) << m;
  EXPECT_NE(m.find("AccessDenied"), std::string::npos) << m;
  EXPECT_NE(m.find("Not authorized"), std::string::npos) << m;
  EXPECT_EQ(sts.requests().size(), 1u);  // a refusal is not retried
}

}  // namespace
}  // namespace stoker
