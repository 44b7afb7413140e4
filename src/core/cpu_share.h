// core/cpu_share.h — how many CPUs this process may use: the one number every
// default that scales with cores starts from (decode threads, readers, index
// threads, the tuner's ceilings, `stoker doctor`'s advice), and where it came
// from, so a user can see why.
//
// The rule, in order:
//  1. affinity: the CPUs in this process's mask (sched_getaffinity), which
//     taskset, numactl, Slurm's --cpu-bind and container cpusets narrow.
//  2. quota: the cgroup CPU quota in CPUs, the smallest along the path from
//     the process's cgroup up to its hierarchy's root (a limit on an ancestor
//     caps every descendant): v2 `cpu.max` ("150000 100000" = 1.5, "max" =
//     none), v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1 = none). The
//     cgroup is the v1 line naming the `cpu` controller in /proc/self/cgroup
//     when there is one (hybrid hosts keep `cpu` on v1), else the v2 line
//     `0::/path`; the hierarchy's mount point and root come from
//     /proc/self/mountinfo (a container sees its own cgroup as "/"), else
//     /sys/fs/cgroup (v2) or /sys/fs/cgroup/cpu,cpuacct (v1).
//  3. local ranks: the node's ranks share what they were given. The count is
//     STOKER_LOCAL_RANKS (the user's), else LOCAL_WORLD_SIZE (torchrun), else
//     SLURM_NTASKS_PER_NODE (Slurm), else 1.
//     - When the mask is the whole of what the cgroup's cpuset (or, without
//       one, the machine's online CPUs) offers, the ranks share that one
//       mask: it is divided by the ranks.
//     - When the mask is a strict subset, the rank was pinned to its own
//       cores (numactl/taskset per rank, --cpu-bind): the mask is already its
//       share and is not divided again.
//     - The quota belongs to the cgroup, which the ranks one launcher starts
//       share (torchrun's children, a pod's processes): it is divided by the
//       ranks either way.
//  4. cores = max(1, floor(min(affinity share, quota share))). A fraction is
//     rounded down: a thread beyond the quota runs until the cgroup has spent
//     its period's quota and then every thread of the cgroup waits out the
//     rest of the period (CFS throttling), a stall of a whole batch's decode
//     that shows as tail latency; the spare fraction goes to the training
//     loop's own thread, which needs a CPU too. 1.5 CPUs -> 1 core.
// Unreadable or malformed cgroup files mean "no quota known", never an error:
// the count falls back to the mask, and the note says what was missing.
//
// Everything is read under CpuShareInputs::root ("/" in production), so a
// test points it at a directory holding proc/self/cgroup, proc/self/mountinfo,
// sys/fs/cgroup/... and sys/devices/system/cpu/online in the kernel's formats.
// Thread-safety: free functions; CurrentCpuShare reads the process's state
// anew on each call (a mask or the environment may change while running).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stoker {

struct CpuShare {
  int cores = 1;               // what defaults scale with (>= 1)
  int affinity = 0;            // CPUs in the process's mask
  int offered = 0;             // CPUs of the cgroup's cpuset, or online; 0: unknown
  double quota = 0;            // the cgroup quota in CPUs; 0: none
  std::string quota_cgroup;    // the cgroup whose quota is the smallest ("" when none)
  int local_ranks = 1;         // the node's ranks sharing this share
  std::string ranks_from;      // "STOKER_LOCAL_RANKS", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", ""
  bool pinned = false;         // mask a strict subset of `offered`: not divided by the ranks
  std::string missing;         // what could not be read, if anything ("" normally)

  // "1 core: affinity 2, quota 1.5, 2 local ranks (LOCAL_WORLD_SIZE)"
  std::string ToString() const;
};

struct CpuShareInputs {
  std::string root = "/";                 // proc/ and sys/ are read under it
  std::vector<int> affinity;              // the mask's CPU numbers
  std::function<std::optional<std::string>(const std::string&)> getenv;  // nullopt: unset
};

// The share from explicit inputs (tests).
CpuShare ComputeCpuShare(const CpuShareInputs& in);

// The share of this process now: root "/", sched_getaffinity, the environment.
CpuShare CurrentCpuShare();

// Parses a kernel CPU list ("0-3,8,10-11") into CPU numbers; nullopt when malformed.
std::optional<std::vector<int>> ParseCpuList(const std::string& text);

}  // namespace stoker
