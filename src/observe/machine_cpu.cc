// observe/machine_cpu.cc — /proc/stat, read at most every 20 ms (see header).
#include "observe/machine_cpu.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <mutex>

#include "observe/clock.h"

namespace stoker {

std::optional<double> ParseProcStatBusy(std::string_view text, long ticks_per_s) {
  if (!text.starts_with("cpu ") || ticks_per_s <= 0) return std::nullopt;
  text.remove_prefix(4);
  // user nice system idle iowait irq softirq steal (guest time is inside user).
  uint64_t v[8] = {};
  int n = 0;
  for (; n < 8; ++n) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v[n]);
    if (ec != std::errc()) break;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
  }
  if (n < 4) return std::nullopt;
  const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / static_cast<double>(ticks_per_s);
}

namespace {

MachineCpu ReadNow() {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  static const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  char buf[512];
  const int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t got = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (got <= 0) return {};
  const std::string_view text(buf, static_cast<size_t>(got));
  const std::optional<double> busy = ParseProcStatBusy(text.substr(0, text.find('\n')), ticks);
  if (!busy) return {};
  const int online = cpus > 0 ? cpus : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int allowed = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
  return {*busy, online, std::clamp(allowed, 1, online)};
}

}  // namespace

MachineCpu MachineCpuTime() {
  static std::mutex mu;
  static MachineCpu cached;           // guarded by mu
  static uint64_t read_at_ns = 0;     // guarded by mu
  static std::atomic<bool> unavailable{false};
  if (unavailable.load(std::memory_order_relaxed)) return {};
  std::lock_guard lock(mu);
  const uint64_t now = NowNs();
  if (read_at_ns == 0 || now - read_at_ns >= kMachineCpuRefreshNs) {
    cached = ReadNow();
    cached.read_at_s = static_cast<double>(now) * 1e-9;
    read_at_ns = now;
    if (cached.cpus == 0) unavailable.store(true, std::memory_order_relaxed);
  }
  return cached;
}

}  // namespace stoker
