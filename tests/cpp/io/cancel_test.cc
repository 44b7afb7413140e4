// io/cancel.h: a cancelled HTTP request stops waiting in its retry back-off
// and stops waiting on a stalled server, and sends nothing more; against a
// real socket server on loopback (one that always answers 503, one that
// accepts and never answers).
#include "io/cancel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "io/http_reader.h"
#include "io/loopback_server.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A loopback server: answers every request with 503 (`stall` false), or
// accepts connections and never answers (`stall` true).
class TinyServer {
 public:
  explicit TinyServer(bool stall) : stall_(stall) {}
  ~TinyServer() {
    server_.reset();  // joined first: held_ is then the caller's alone
    for (int c : held_) ::close(c);
  }
  std::string url() const { return server_->url("x.tar"); }
  int requests() const { return requests_.load(); }

 private:
  void Answer(int c) {
    requests_++;
    if (stall_) {
      held_.push_back(c);  // open, silent, until the server ends
      return;
    }
    char buf[4096];
    (void)!::recv(c, buf, sizeof buf, 0);
    const char reply[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)!::send(c, reply, sizeof reply - 1, MSG_NOSIGNAL);
    ::close(c);
  }

  const bool stall_;
  std::atomic<int> requests_{0};
  std::vector<int> held_;  // the server thread's, read after join
  std::unique_ptr<test_data::LoopbackServer> server_ =
      std::make_unique<test_data::LoopbackServer>([this](int c) { Answer(c); }, 16);  // last: serves at once
};

// Opens `url` (a HEAD with its retries) on a thread obeying `cancel`, which
// fires once `server` has seen the first request (not after a fixed time:
// on a loaded machine the request may not have left by then); the status it
// ended with and how long after `cancel` fired it returned.
struct Outcome {
  Status status;
  double after_cancel_s = 0;
};
Outcome OpenThenCancel(const std::string& url, const IoOptions& o, const TinyServer& server) {
  Cancellation cancel;
  Outcome out;
  Clock::time_point done;
  std::thread t([&] {
    CancelScope scope(&cancel);
    auto r = HttpReader::Open(HttpTarget{url, url, "", "", "", {}}, o);
    out.status = r.ok() ? Status::Ok() : r.status();
    done = Clock::now();
  });
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (server.requests() < 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(server.requests(), 1) << "no request reached the server in a minute";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // most often into the back-off or the stalled wait
  const Clock::time_point fired = Clock::now();
  cancel.Cancel();
  t.join();
  out.after_cancel_s = std::chrono::duration<double>(done - fired).count();
  return out;
}

TEST(CancellationTest, SleepForEndsAtCancelAndLaterOnesReturnAtOnce) {
  Cancellation c;
  EXPECT_TRUE(c.SleepFor(std::chrono::milliseconds(1)));
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.Cancel();
  });
  const auto t0 = Clock::now();
  EXPECT_FALSE(c.SleepFor(std::chrono::seconds(120)));
  EXPECT_LT(SecondsSince(t0), 30.0);  // the cancel's 50 ms, not the sleep's two minutes
  t.join();
  EXPECT_TRUE(c.cancelled());
  EXPECT_FALSE(c.SleepFor(std::chrono::seconds(30)));
}

TEST(CancellationTest, ScopesNestPerThread) {
  Cancellation a, b;
  EXPECT_EQ(CurrentCancellation(), nullptr);
  {
    CancelScope sa(&a);
    EXPECT_EQ(CurrentCancellation(), &a);
    {
      CancelScope sb(&b);
      EXPECT_EQ(CurrentCancellation(), &b);
      std::thread([] { EXPECT_EQ(CurrentCancellation(), nullptr); }).join();
    }
    EXPECT_EQ(CurrentCancellation(), &a);
  }
  EXPECT_EQ(CurrentCancellation(), nullptr);
}

TEST(CancellationTest, HttpRetryBackoffEndsAtCancelAndNoFurtherAttemptIsSent) {
  TinyServer server(/*stall=*/false);
  IoOptions o;
  o.attempts = 100;
  o.timeout_ms = 5000;
  o.backoff_ms = 120000;  // a retry waits 60-120 s: only the cancel ends it soon
  o.backoff_max_ms = 120000;
  const Outcome r = OpenThenCancel(server.url(), o, server);
  EXPECT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.message();
  EXPECT_NE(r.status.message().find(server.url()), std::string::npos) << r.status.message();
  // A condition-variable wake-up (or, were the cancel to land before the 503
  // is read, libcurl's once-a-second progress callback): 10 s is ten times
  // the slower, and far from the minute of back-off it cut short.
  EXPECT_LT(r.after_cancel_s, 10.0);
  const int sent = server.requests();
  EXPECT_EQ(sent, 1);  // the first attempt only: the back-off was cut short, nothing followed
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(server.requests(), sent);
}

TEST(CancellationTest, HttpRequestOnAStalledServerIsAbortedAtCancel) {
  TinyServer server(/*stall=*/true);
  IoOptions o;
  o.attempts = 3;
  o.timeout_ms = 120000;  // the request deadline alone would hold it two minutes
  o.backoff_ms = 10;
  o.backoff_max_ms = 10;
  const Outcome r = OpenThenCancel(server.url(), o, server);
  EXPECT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.message();
  // libcurl's progress callback runs at least once a second while idle: 10 s
  // is ten times that.
  EXPECT_LT(r.after_cancel_s, 10.0);
  EXPECT_EQ(server.requests(), 1);
}

TEST(CancellationTest, WithoutCancellationRetriesRunToTheirBudget) {
  TinyServer server(/*stall=*/false);
  IoOptions o;
  o.attempts = 3;
  o.timeout_ms = 2000;
  o.backoff_ms = 1;
  o.backoff_max_ms = 2;
  auto r = HttpReader::Open(HttpTarget{server.url(), server.url(), "", "", "", {}}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().message();
  EXPECT_NE(r.status().message().find("3 attempts"), std::string::npos) << r.status().message();
  EXPECT_EQ(server.requests(), 3);
}

}  // namespace
}  // namespace stoker
