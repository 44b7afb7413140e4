// The retry budget is time: a store that answers 503 for a while and then
// serves is read through (however many attempts that takes), one that keeps
// failing past the deadline is given up with the deadline named, a permanent
// answer is not retried, and a host that never answered gets the short
// first-contact budget. Real HTTP on loopback (LoopbackServer).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "io/http_reader.h"
#include "io/outage.h"
#include "io/reader.h"
#include "loopback_server.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;
using test_data::LoopbackServer;

// Reads the request head, answers `status` with the body's bytes [range] or
// a short error, and closes.
void Answer(int fd, int status, const std::string& body) {
  const std::string req = test_data::ReadRequestHead(fd);
  std::string out;
  if (status == 200) {
    const bool head = req.starts_with("HEAD");
    size_t a = 0, b = body.size() - 1;
    const size_t r = req.find("Range: bytes=");
    if (r != std::string::npos) std::sscanf(req.c_str() + r, "Range: bytes=%zu-%zu", &a, &b);
    const std::string part = body.substr(a, b - a + 1);
    out = std::string(r != std::string::npos ? "HTTP/1.1 206 Partial\r\n" : "HTTP/1.1 200 OK\r\n") +
          "Content-Length: " + std::to_string(head ? body.size() : part.size()) + "\r\n" +
          (r != std::string::npos ? "Content-Range: bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                        std::to_string(body.size()) + "\r\n"
                                  : "") +
          "Connection: close\r\n\r\n" + (head ? "" : part);
  } else {
    out = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  }
  (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  ::close(fd);
}

HttpTarget Plain(const std::string& url) { return HttpTarget{url, url, "", "", "", {}}; }

IoOptions Fast(int deadline_ms) {
  IoOptions o;
  o.retry_deadline_ms = deadline_ms;
  o.backoff_ms = 20;
  o.backoff_max_ms = 100;
  o.timeout_ms = 2000;
  return o;
}

TEST(RetryDeadlineTest, AnOutageShorterThanTheDeadlineIsReadThrough) {
  const std::string body = "0123456789abcdef";
  // Down for its first ten answers (counted, not timed: a loaded machine
  // sends fewer requests a second), about a second at these back-offs.
  std::atomic<int> refused{0};
  LoopbackServer server([&](int fd) {
    const bool down = refused.load() < 10;
    if (down) ++refused;
    Answer(fd, down ? 503 : 200, body);
  });
  // The first answer (a 503) marks the host reached: the full deadline applies.
  auto r = HttpReader::Open(Plain(server.url("a")), Fast(10000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<uint8_t> out(6);
  ASSERT_TRUE((*r)->PRead(4, out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "456789");
  EXPECT_EQ(refused.load(), 10);  // more than the old six-attempt budget
  EXPECT_EQ(GlobalIoCounters().OutageSeconds(), 0);  // ended by the success
}

TEST(RetryDeadlineTest, PastTheDeadlineTheErrorNamesIt) {
  LoopbackServer server([](int fd) { Answer(fd, 503, ""); });
  const auto t0 = Clock::now();
  auto r = HttpReader::Open(Plain(server.url("b")), Fast(700));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("HTTP 503"), std::string::npos) << m;
  EXPECT_NE(m.find("retry deadline of 0.7 s spent"), std::string::npos) << m;
  EXPECT_GE(secs, 0.6);
  EXPECT_LT(secs, 7.0);  // ten times the deadline: it ended the retries
}

TEST(RetryDeadlineTest, PermanentAnswersAreNotRetried) {
  for (int status : {403, 404}) {
    std::atomic<int> asked{0};
    LoopbackServer server([&](int fd) {
      ++asked;
      Answer(fd, status, "");
    });
    auto r = HttpReader::Open(Plain(server.url("c")), Fast(60000));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(asked.load(), 1) << status;
    EXPECT_NE(r.status().message().find("HTTP " + std::to_string(status)), std::string::npos)
        << r.status().message();
  }
}

TEST(RetryDeadlineTest, AHostThatNeverAnsweredGetsTheShortBudget) {
  // A port nothing listens on: refused at once, every time.
  IoOptions o = Fast(600000);
  const auto t0 = Clock::now();
  auto r = HttpReader::Open(Plain("http://127.0.0.1:1/x"), o);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("never answered"), std::string::npos) << r.status().message();
  EXPECT_LT(secs, kFirstContactDeadlineMs / 1000.0 + 2);
}

TEST(RetryDeadlineTest, OriginsAreSchemeHostAndPort) {
  EXPECT_EQ(UrlOrigin("http://127.0.0.1:8080/a/b.tar?x=1"), "http://127.0.0.1:8080");
  EXPECT_EQ(UrlOrigin("https://bucket.s3.us-east-1.amazonaws.com/k"), "https://bucket.s3.us-east-1.amazonaws.com");
  EXPECT_EQ(UrlOrigin("http://h"), "http://h");
}

}  // namespace
}  // namespace stoker
