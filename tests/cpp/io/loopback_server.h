// tests/cpp/io/loopback_server.h — a TCP listener on 127.0.0.1 (an ephemeral
// port) whose one thread hands each accepted connection to `on_connection`,
// which owns the descriptor from then on (answers and closes it, or holds
// it). The tests' HTTP servers (cancel, remote run, retry deadline, credentials)
// sit on it; ReadRequestHead reads what a client sent.
// The destructor stops and joins the thread (within ~20 ms: accept is polled).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace stoker::test_data {

// An HTTP request's head (request line and headers, through the blank
// line) read from a connection; what arrived when the peer stopped sending.
inline std::string ReadRequestHead(int fd) {
  std::string in;
  char buf[4096];
  while (in.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

class LoopbackServer {
 public:
  explicit LoopbackServer(std::function<void(int fd)> on_connection, int backlog = 64)
      : on_connection_(std::move(on_connection)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, backlog), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  // "http://127.0.0.1:<port>/<path>"
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + "/" + path; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c >= 0) on_connection_(c);
    }
  }

  const std::function<void(int)> on_connection_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once everything it reads is set
};

}  // namespace stoker::test_data
