// The Loader's threads over HTTP: early start and epoch carry-over on remote
// shards equal a fresh loader, and a loader destroyed while its reads wait in
// a long retry back-off returns at once (io/cancel.h) and sends nothing more.
// Against a small HTTP/1.1 range server on loopback (one request per
// connection). Also run under ThreadSanitizer (scripts/sanitize.sh).
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "formats/tar.h"
#include "io/loopback_server.h"
#include "io/reader.h"
#include "stoker/loader.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

// Serves the files of `dir` by HEAD and ranged GET; once `fail` is set,
// every GET of a .tar is answered 503 (HEADs still pass).
class RangeServer {
 public:
  explicit RangeServer(std::string dir) : dir_(std::move(dir)) {}
  std::string url(const std::string& name) const { return server_.url(name); }
  std::atomic<bool> fail{false};
  std::atomic<int> gets{0};  // GETs of .tar objects answered

 private:
  void Answer(int c) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<size_t>(n));
    }
    std::istringstream in(req);
    std::string method, path;
    in >> method >> path;
    std::ifstream f(dir_ + path, std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string head;
    const bool tar = path.size() > 4 && path.compare(path.size() - 4, 4, ".tar") == 0;
    if (!f.is_open()) {
      head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n";
      body.clear();
    } else if (method == "GET" && tar && fail) {
      head = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n";
      body.clear();
    } else {
      const size_t size = body.size();
      size_t lo = 0, hi = size ? size - 1 : 0;
      const size_t r = req.find("Range: bytes=");
      if (method == "GET" && r != std::string::npos) {
        lo = std::strtoull(req.c_str() + r + 13, nullptr, 10);
        hi = std::strtoull(req.c_str() + req.find('-', r + 13) + 1, nullptr, 10);
        hi = std::min(hi, size - 1);
        body = body.substr(lo, hi - lo + 1);
        head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(lo) + "-" +
               std::to_string(hi) + "/" + std::to_string(size) + "\r\n";
      } else {
        head = "HTTP/1.1 200 OK\r\n";
      }
      head += "ETag: \"v1\"\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
      if (method == "HEAD") body.clear();
      if (method == "GET" && tar) gets++;
    }
    head += "Connection: close\r\n\r\n";
    std::string out = head + body;
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = ::send(c, out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  const std::string dir_;
  test_data::LoopbackServer server_{[this](int c) {  // last: serves at once
    Answer(c);
    ::close(c);
  }};
};

// 3 shards x 20 samples "k<i>.cls" = "<i>".
std::string MakeShards() {
  char tmpl[] = "/tmp/stoker-remote-run-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  for (int s = 0; s < 3; ++s) {
    auto w = TarWriter::Create(dir + "/s" + std::to_string(s) + ".tar");
    EXPECT_TRUE(w.ok());
    for (int i = s * 20; i < (s + 1) * 20; ++i) {
      std::string v = std::to_string(i);
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(v.data()), v.size()})
                      .ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return dir;
}

LoaderOptions Options(const RangeServer& server) {
  LoaderOptions o;
  o.sources = {server.url("s{0..2}.tar")};
  o.fields = {ScalarField("cls", DType::kI64)};
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 9;
  o.decode_threads = 2;
  o.io_depth = 3;
  o.prefetch_batches = 1;
  o.read_ahead_batches = 1;
  o.coalesce_bytes = 0;  // a GET per sample: many requests in flight
  return o;
}

std::vector<int64_t> Drain(Loader& l) {
  std::vector<int64_t> out;
  while (true) {
    auto batch = l.Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || !*batch) break;
    const ArrayView& cls = (*batch)->arrays()[0];
    for (int i = 0; i < (*batch)->size(); ++i) {
      int64_t v;
      std::memcpy(&v, cls.data + 8 * i, 8);
      out.push_back(v);
    }
  }
  return out;
}

size_t Threads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

void QuickRetries(int backoff_ms) {
  IoOptions o;
  o.attempts = 50;
  o.timeout_ms = 5000;
  o.backoff_ms = backoff_ms;
  o.backoff_max_ms = backoff_ms;
  SetDefaultIoOptions(o);
}

TEST(RemoteRunTest, CarriedOverEpochsEqualAFreshLoader) {
  RangeServer server(MakeShards());
  QuickRetries(5);
  auto l = Loader::Create(Options(server));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_TRUE((*l)->SetEpoch(0).ok());
  std::vector<int64_t> e0 = Drain(**l);
  ASSERT_TRUE((*l)->SetEpoch(1).ok());
  std::vector<int64_t> e1 = Drain(**l);
  ASSERT_TRUE((*l)->SetEpoch(2).ok());
  std::vector<int64_t> e2 = Drain(**l);
  ASSERT_TRUE((*l)->SetEpoch(7).ok());  // not the one prepared: dropped, planned afresh
  std::vector<int64_t> e7 = Drain(**l);
  EXPECT_GE((*l)->Stats().batches_carried, 1u);
  l->reset();
  for (auto [epoch, got] : {std::pair{1, &e1}, {2, &e2}, {7, &e7}}) {
    auto f = Loader::Create(Options(server));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->SetEpoch(epoch).ok());
    EXPECT_EQ(Drain(**f), *got) << "epoch " << epoch;
  }
  EXPECT_EQ(e1.size(), 60u);
  EXPECT_NE(e0, e1);
}

TEST(RemoteRunTest, DestroyedDuringARetryBackoffReturnsAtOnceAndSendsNothingMore) {
  RangeServer server(MakeShards());
  QuickRetries(120000);  // a retry waits 60-120 s: only the cancel ends it soon
  const size_t threads = Threads();
  auto l = Loader::Create(Options(server));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  server.fail = true;
  // Consume what was read before the failures: the batches after meet 503s.
  const uint64_t throttled = GlobalIoCounters().throttled.load();
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (GlobalIoCounters().throttled.load() < throttled + 2 && Clock::now() < deadline) {
    bool waiting = false;
    auto b = (*l)->NextWithin(20, &waiting);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
  }
  ASSERT_GE(GlobalIoCounters().throttled.load(), throttled + 2);
  const auto t0 = Clock::now();
  l->reset();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(took, 30.0);  // generous for a teardown (milliseconds); the back-off alone is >= 60 s
  EXPECT_EQ(Threads(), threads);  // every thread of the loader joined
  const uint64_t sent = GlobalIoCounters().requests.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(GlobalIoCounters().requests.load(), sent);
}

}  // namespace
}  // namespace stoker
