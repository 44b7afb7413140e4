// observe/machine_cpu.cc — /proc/stat, read at most every 20 ms (see header).
#include "observe/machine_cpu.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <mutex>
#include <string>

#include "observe/clock.h"

namespace stoker {

std::optional<double> ParseProcStatBusy(std::string_view line, long ticks_per_s) {
  // "cpu  ..." (all CPUs) or "cpuN ..." (one): the label, then
  // user nice system idle iowait irq softirq steal (guest time is inside user).
  if (!line.starts_with("cpu") || ticks_per_s <= 0) return std::nullopt;
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  line.remove_prefix(space);
  uint64_t v[8] = {};
  int n = 0;
  for (; n < 8; ++n) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v[n]);
    if (ec != std::errc()) break;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
  }
  if (n < 4) return std::nullopt;
  const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / static_cast<double>(ticks_per_s);
}

namespace {

// The busy time of the CPUs this process may run on (its affinity): what
// other processes do on CPUs it cannot use is no contention for it.
MachineCpu ReadNow() {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_affinity = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  const int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[16384];
  for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<size_t>(got));
    if (text.find("\nintr") != std::string::npos) break;  // the CPU lines are all read
  }
  ::close(fd);
  MachineCpu out;
  size_t begin = text.find('\n');  // past the aggregate line
  while (begin != std::string::npos && text.compare(begin + 1, 3, "cpu") == 0) {
    const size_t end = text.find('\n', begin + 1);
    const std::string_view line(text.data() + begin + 1, (end == std::string::npos ? text.size() : end) - begin - 1);
    int cpu = -1;
    std::from_chars(line.data() + 3, line.data() + line.size(), cpu);
    const std::optional<double> busy = ParseProcStatBusy(line, ticks);
    if (busy && cpu >= 0) {
      ++out.cpus;
      if (!have_affinity || (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed))) {
        ++out.allowed_cpus;
        out.busy_s += *busy;
      }
    }
    begin = end;
  }
  if (out.allowed_cpus == 0) return {};
  return out;
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
