// tests/cpp/io/http_credentials_test.cc — HttpReader signing with a
// CredentialProvider: every attempt asks it for the current keys, and a
// store's refusal of an expired token (S3's 400 ExpiredToken body; a HEAD's
// bodiless 400) invalidates them and is signed again with fresh ones, while
// a refusal for another reason is reported, not retried.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "io/aws_credentials.h"
#include "io/http_reader.h"
#include "io/loopback_server.h"

namespace stoker {
namespace {

const std::string kObject = "0123456789abcdefghijklmnopqrstuvwxyz";

// An S3-like object server that accepts only the session token `valid`.
class TokenCheckingStore {
 public:
  explicit TokenCheckingStore(std::string valid) : valid_(std::move(valid)), server_([this](int fd) { Serve(fd); }) {}
  std::string url() const { return server_.url("bucket/key"); }
  std::vector<std::string> log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  std::string refusal_code = "ExpiredToken";

 private:
  void Serve(int fd) {
    const std::string in = test_data::ReadRequestHead(fd);
    const std::string method = in.substr(0, in.find(' '));
    std::string token;
    if (size_t p = in.find("x-amz-security-token: "); p != std::string::npos) {
      token = in.substr(p + 22, in.find("\r\n", p) - p - 22);
    }
    const bool signed_ = in.find("Authorization: AWS4-HMAC-SHA256") != std::string::npos;
    {
      std::lock_guard lock(mu_);
      log_.push_back(method + " " + token);
    }
    std::string out;
    if (!signed_ || token != valid_) {
      std::string body = method == "HEAD" ? "" :
          "<Error><Code>" + refusal_code + "</Code><Message>The provided token has expired.</Message></Error>";
      out = "HTTP/1.1 400 Bad Request\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nConnection: close\r\n\r\n" + (method == "HEAD" ? "" : body);
    } else if (method == "HEAD") {
      out = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kObject.size()) +
            "\r\nETag: \"e1\"\r\nConnection: close\r\n\r\n";
    } else {
      out = "HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 5-14/" +
            std::to_string(kObject.size()) + "\r\nETag: \"e1\"\r\nConnection: close\r\n\r\n" + kObject.substr(5, 10);
    }
    (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  const std::string valid_;
  std::mutex mu_;
  std::vector<std::string> log_;  // guarded by mu_: "<method> <token>"
  test_data::LoopbackServer server_;
};

// Keys "old" first, then "new" on every later fetch.
std::shared_ptr<CredentialProvider> OldThenNew(std::atomic<int>& fetches) {
  return NewRefreshingProvider([&fetches]() -> Result<AwsCredentials> {
    const int n = ++fetches;
    // By their own word valid for an hour: only the store's refusal replaces them.
    return AwsCredentials{"AK", "SK", n == 1 ? "old" : "new", std::chrono::system_clock::now() + std::chrono::hours(1),
                          "test source #" + std::to_string(n)};
  });
}

IoOptions Quick() {
  IoOptions o;
  o.attempts = 3;
  o.timeout_ms = 3000;
  o.backoff_ms = 1;
  o.backoff_max_ms = 5;
  return o;
}

TEST(HttpCredentials, ARefusedTokenIsReplacedAndTheRequestSignedAgain) {
  TokenCheckingStore store("new");
  std::atomic<int> fetches{0};
  HttpTarget t{store.url(), "s3://bucket/key", "aws:amz:us-east-1:s3", "", "", OldThenNew(fetches)};
  auto r = HttpReader::Open(t, Quick());  // HEAD: 400 without a body under "old", then "new"
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Size(), kObject.size());
  std::string got(10, '\0');
  auto n = (*r)->ReadAt(5, {reinterpret_cast<uint8_t*>(got.data()), got.size()});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(got, kObject.substr(5, 10));
  EXPECT_EQ(fetches, 2);
  EXPECT_EQ(store.log(), (std::vector<std::string>{"HEAD old", "HEAD new", "GET new"}));
}

TEST(HttpCredentials, AnExpiredTokenOnAGetIsRetriedWithFreshKeys) {
  TokenCheckingStore store("new");
  std::atomic<int> fetches{0};
  auto provider = OldThenNew(fetches);
  HttpTarget t{store.url(), "s3://bucket/key", "aws:amz:us-east-1:s3", "", "", provider};
  auto body = HttpGetWhole(t, Quick());
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(store.log(), (std::vector<std::string>{"GET old", "GET new"}));
  EXPECT_EQ(provider->fetches(), 2);
}

TEST(HttpCredentials, AnotherRefusalIsReportedWithItsCodeAndNotRetried) {
  TokenCheckingStore store("never");
  store.refusal_code = "AccessDenied";
  std::atomic<int> fetches{0};
  HttpTarget t{store.url(), "s3://bucket/key", "aws:amz:us-east-1:s3", "", "", OldThenNew(fetches)};
  auto body = HttpGetWhole(t, Quick());
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("HTTP 400 AccessDenied"), std::string::npos) << body.status().message();
  EXPECT_NE(body.status().message().find("test source #1"), std::string::npos) << body.status().message();
  EXPECT_EQ(store.log().size(), 1u);
  EXPECT_EQ(fetches, 1);
}

TEST(HttpCredentials, TokenRefusalsAreRetriedTwiceAtMost) {
  TokenCheckingStore store("never");
  std::atomic<int> fetches{0};
  HttpTarget t{store.url(), "s3://bucket/key", "aws:amz:us-east-1:s3", "", "", OldThenNew(fetches)};
  auto body = HttpGetWhole(t, Quick());
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("ExpiredToken"), std::string::npos) << body.status().message();
  EXPECT_EQ(store.log().size(), 3u);  // the first try and two with fresh keys
  EXPECT_EQ(fetches, 3);
}

}  // namespace
}  // namespace stoker
