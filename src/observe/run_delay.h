// observe/run_delay.h — how long this process's threads waited for a CPU.
//
// The kernel counts, per thread, the time it was runnable but not running
// (the second field of /proc/<pid>/task/<tid>/schedstat). Over a
// slow batch's wait this is the direct evidence of CPU contention: a busy
// machine whose other processes hold the cores slows the loader only if
// its threads queued for them. A reader asleep in a throttle or a decoder
// waiting for reads is not runnable and adds nothing, so a slow store on a
// busy machine is still named as storage.
// Read at most once every kRunDelayRefreshNs and cached in between, as the
// machine's busy time is (machine_cpu.h). Thread-safety: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stoker {

inline constexpr uint64_t kRunDelayRefreshNs = 20'000'000;

// Seconds the process's live threads have spent runnable and waiting for a
// CPU since each started; nullopt where schedstat is not available (not
// Linux, or a kernel without CONFIG_SCHED_INFO): no evidence either way.
// A thread that exits takes its count with it, so differences are clamped
// at zero by their users.
std::optional<double> ProcessRunDelaySeconds();

// The run-queue wait of one schedstat line ("<on-cpu ns> <waiting ns> <slices>"), in seconds.
std::optional<double> ParseSchedstatWait(std::string_view line);

}  // namespace stoker
