// observe/cpu_time.h — CPU time of the process and of one thread, for the
// controller's question "how many cores does the training step use?": the
// process's CPU time less the loader threads' (pipeline/autotune.h).
// Thread-safety: both read kernel clocks; ThreadCpuTimeNs works on any
// joinable thread of this process, from any thread.
#pragma once

#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <thread>

namespace stoker {

inline uint64_t ClockNs(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t ProcessCpuTimeNs() { return ClockNs(CLOCK_PROCESS_CPUTIME_ID); }

// 0 for a thread that is not running (not started, or already joined).
inline uint64_t ThreadCpuTimeNs(std::thread& t) {
  if (!t.joinable()) return 0;
  clockid_t clock;
  if (pthread_getcpuclockid(t.native_handle(), &clock) != 0) return 0;
  return ClockNs(clock);
}

}  // namespace stoker
