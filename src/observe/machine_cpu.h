// observe/machine_cpu.h — the whole machine's busy CPU time, from /proc/stat.
//
// The slow-batch detector's evidence for CPU contention: over a wait, the
// machine's busy CPU seconds less this process's own are what other
// processes took. A stage that looks slow (a pread of cached pages taking
// 400 ms) on a machine whose cores other processes hold is not slow storage.
// Two snapshots are taken per batch, so the file is read at most once every
// kMachineCpuRefreshNs and the cached value served in between: the figure
// lags by up to that much, small beside the 50 ms a slow batch needs.
// Thread-safety: MachineCpuTime() may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stoker {

struct MachineCpu {
  // CPU seconds the CPUs this process may run on (its affinity) spent busy
  // since boot (user, nice, system, irq, softirq, steal): what other
  // processes do on CPUs it cannot use is no contention for it.
  double busy_s = 0;
  int cpus = 0;          // the machine's CPUs
  int allowed_cpus = 0;  // of them, the ones busy_s covers
  double read_at_s = 0;  // when it was read (NowNs, in seconds): a difference covers the time between two reads
};

inline constexpr uint64_t kMachineCpuRefreshNs = 20'000'000;

// Cached: re-read when older than kMachineCpuRefreshNs. {0, 0} where
// /proc/stat cannot be read (not Linux): no contention evidence then.
MachineCpu MachineCpuTime();

// One "cpu" line of /proc/stat (the aggregate or one CPU's), busy seconds at `ticks_per_s`.
std::optional<double> ParseProcStatBusy(std::string_view text, long ticks_per_s);

}  // namespace stoker
