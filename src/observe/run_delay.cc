// observe/run_delay.cc — /proc/self/task/*/schedstat, read at most every 20 ms (see header).
#include "observe/run_delay.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <mutex>
#include <string>

#include "observe/clock.h"

namespace stoker {

std::optional<double> ParseSchedstatWait(std::string_view line) {
  uint64_t v[2] = {};
  for (uint64_t& x : v) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), x);
    if (ec != std::errc()) return std::nullopt;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
  }
  return static_cast<double>(v[1]) * 1e-9;
}

namespace {

std::optional<double> ReadNow() {
  const int dir_fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return std::nullopt;
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return std::nullopt;
  }
  double total = 0;
  bool any = false;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string path = std::string(entry->d_name) + "/schedstat";
    const int fd = ::openat(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // the thread exited since the listing
    char buf[128];
    const ssize_t got = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (got <= 0) continue;
    if (const std::optional<double> wait = ParseSchedstatWait(std::string_view(buf, static_cast<size_t>(got)))) {
      total += *wait;
      any = true;
    }
  }
  ::closedir(dir);  // closes dir_fd
  if (!any) return std::nullopt;
  return total;
}

}  // namespace

std::optional<double> ProcessRunDelaySeconds() {
  static std::mutex mu;
  static std::optional<double> cached;  // guarded by mu
  static uint64_t read_at_ns = 0;       // guarded by mu
  static std::atomic<bool> unavailable{false};
  if (unavailable.load(std::memory_order_relaxed)) return std::nullopt;
  std::lock_guard lock(mu);
  const uint64_t now = NowNs();
  if (read_at_ns == 0 || now - read_at_ns >= kRunDelayRefreshNs) {
    cached = ReadNow();
    read_at_ns = now;
    if (!cached) unavailable.store(true, std::memory_order_relaxed);
  }
  return cached;
}

}  // namespace stoker
