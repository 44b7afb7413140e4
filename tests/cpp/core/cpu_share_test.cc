// The CPU share (core/cpu_share.h) read from fixture trees in the kernel's
// own formats: /proc/self/cgroup, /proc/self/mountinfo, cgroup v2 cpu.max
// and cpuset.cpus.effective, v1 cpu.cfs_quota_us/cpu.cfs_period_us, and
// /sys/devices/system/cpu/online.
#include "core/cpu_share.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace stoker {
namespace {

namespace fs = std::filesystem;

class CpuShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("stoker_cpu_share_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  CpuShare Share(int cpus, std::map<std::string, std::string> env = {}) {
    CpuShareInputs in;
    in.root = root_.string();
    for (int c = 0; c < cpus; ++c) in.affinity.push_back(c);
    in.getenv = [env](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    return ComputeCpuShare(in);
  }

  // A cgroup v2 host: the process in /kubepods/pod1/ctr, 16 CPUs online.
  void V2Host() {
    Write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    Write("proc/self/mountinfo",
          "24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
          "rw,nsdelegate,memory_recursiveprot\n"
          "30 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
    Write("sys/devices/system/cpu/online", "0-15\n");
    Write("sys/fs/cgroup/cpuset.cpus.effective", "0-15\n");
  }

  fs::path root_;
};

TEST_F(CpuShareTest, V2QuotaCapsTheMask) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "800000 100000\n");
  const CpuShare s = Share(16);
  EXPECT_EQ(s.cores, 8);
  EXPECT_EQ(s.affinity, 16);
  EXPECT_DOUBLE_EQ(s.quota, 8.0);
  EXPECT_EQ(s.quota_cgroup, "/sys/fs/cgroup/kubepods/pod1/ctr");
  EXPECT_EQ(s.ToString(), "8 cores: affinity 16, quota 8.0, 1 local rank");
}

TEST_F(CpuShareTest, V2MaxIsNoQuota) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  const CpuShare s = Share(16);
  EXPECT_EQ(s.cores, 16);
  EXPECT_EQ(s.quota, 0);
  EXPECT_EQ(s.missing, "");
  EXPECT_EQ(s.ToString(), "16 cores: affinity 16, no quota, 1 local rank");
}

TEST_F(CpuShareTest, FractionalQuotaRoundsDown) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "150000 100000\n");
  const CpuShare s = Share(16);
  EXPECT_DOUBLE_EQ(s.quota, 1.5);
  EXPECT_EQ(s.cores, 1);  // cpu_share.h rule 4: a thread past the quota is throttled
  // Below one CPU still runs one thread.
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "50000 100000\n");
  EXPECT_EQ(Share(16).cores, 1);
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "250000 100000\n");
  EXPECT_EQ(Share(16).cores, 2);
}

TEST_F(CpuShareTest, NestedTakesTheSmallestQuotaOnThePath) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  Write("sys/fs/cgroup/kubepods/pod1/cpu.max", "400000 100000\n");  // the pod's limit
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  Write("sys/fs/cgroup/kubepods/pod2/cpu.max", "100000 100000\n");  // another pod: not on the path
  CpuShare s = Share(16);
  EXPECT_EQ(s.cores, 4);
  EXPECT_EQ(s.quota_cgroup, "/sys/fs/cgroup/kubepods/pod1");
  // A tighter limit lower down wins over the ancestor's.
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "300000 100000\n");
  s = Share(16);
  EXPECT_EQ(s.cores, 3);
  EXPECT_EQ(s.quota_cgroup, "/sys/fs/cgroup/kubepods/pod1/ctr");
}

TEST_F(CpuShareTest, V2InsideACgroupNamespaceReadsTheMountsTop) {
  // A container sees its own cgroup as "/" and has it mounted at /sys/fs/cgroup.
  Write("proc/self/cgroup", "0::/\n");
  Write("proc/self/mountinfo", "400 390 0:30 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
  Write("sys/fs/cgroup/cpu.max", "200000 100000\n");
  Write("sys/devices/system/cpu/online", "0-63\n");
  EXPECT_EQ(Share(64).cores, 2);
}

TEST_F(CpuShareTest, V1QuotaFromMountinfo) {
  // A v1 host: the cpu controller mounted with cpuacct, its mount root a
  // docker cgroup (the container's view), the process one level below.
  Write("proc/self/cgroup",
        "12:pids:/docker/abc\n11:cpu,cpuacct:/docker/abc/job\n3:cpuset:/docker/abc\n1:name=systemd:/docker/abc\n");
  Write("proc/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
        "35 31 0:32 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "36 31 0:33 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid - cgroup cgroup rw,cpuset\n");
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "600000\n");
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  Write("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
  Write("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  Write("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-31\n");
  Write("sys/devices/system/cpu/online", "0-95\n");
  const CpuShare s = Share(32);
  EXPECT_DOUBLE_EQ(s.quota, 6.0);
  EXPECT_EQ(s.cores, 6);
  EXPECT_EQ(s.offered, 32);  // the container's cpuset, not the host's 96
  EXPECT_FALSE(s.pinned);
}

TEST_F(CpuShareTest, V1AtTheUsualPathWithoutMountinfo) {
  Write("proc/self/cgroup", "4:cpu:/\n0::/\n");  // hybrid: cpu stays on v1
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
  Write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const CpuShare s = Share(8);
  EXPECT_DOUBLE_EQ(s.quota, 1.5);
  EXPECT_EQ(s.cores, 1);
}

TEST_F(CpuShareTest, NoCgroupFilesMeansTheMask) {
  const CpuShare s = Share(12);
  EXPECT_EQ(s.cores, 12);
  EXPECT_EQ(s.quota, 0);
  EXPECT_EQ(s.missing, "no /proc/self/cgroup");
}

TEST_F(CpuShareTest, MalformedQuotaIsNamedNotFatal) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "lots 100000\n");
  const CpuShare s = Share(16);
  EXPECT_EQ(s.cores, 16);
  EXPECT_EQ(s.missing, "unreadable /sys/fs/cgroup/kubepods/pod1/ctr/cpu.max");
}

TEST_F(CpuShareTest, RanksSharingOneMaskDivideIt) {
  V2Host();
  CpuShare s = Share(16, {{"LOCAL_WORLD_SIZE", "8"}});
  EXPECT_EQ(s.cores, 2);
  EXPECT_EQ(s.local_ranks, 8);
  EXPECT_EQ(s.ToString(), "2 cores: affinity 16, no quota, 8 local ranks (LOCAL_WORLD_SIZE)");
  // As many ranks as cores: one each, never zero.
  EXPECT_EQ(Share(16, {{"LOCAL_WORLD_SIZE", "16"}}).cores, 1);
  EXPECT_EQ(Share(16, {{"LOCAL_WORLD_SIZE", "32"}}).cores, 1);
  // Slurm's count where torchrun's is absent; the user's setting before both.
  EXPECT_EQ(Share(16, {{"SLURM_NTASKS_PER_NODE", "4"}}).cores, 4);
  s = Share(16, {{"STOKER_LOCAL_RANKS", "2"}, {"LOCAL_WORLD_SIZE", "8"}});
  EXPECT_EQ(s.cores, 8);
  EXPECT_EQ(s.ranks_from, "STOKER_LOCAL_RANKS");
  // A count that is not one is named, and ignored.
  s = Share(16, {{"LOCAL_WORLD_SIZE", "eight"}});
  EXPECT_EQ(s.cores, 16);
  EXPECT_EQ(s.missing, "LOCAL_WORLD_SIZE='eight' is not a count");
}

TEST_F(CpuShareTest, QuotaIsSharedByTheRanks) {
  V2Host();
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "800000 100000\n");
  const CpuShare s = Share(16, {{"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_EQ(s.cores, 4);
  EXPECT_EQ(s.ToString(), "4 cores: affinity 16, quota 8.0, 2 local ranks (LOCAL_WORLD_SIZE)");
}

TEST_F(CpuShareTest, APinnedRankKeepsItsMask) {
  V2Host();
  // Each of 8 ranks was given 2 of the 16 CPUs (numactl/taskset per rank).
  CpuShareInputs in;
  in.root = root_.string();
  in.affinity = {4, 5};
  in.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "LOCAL_WORLD_SIZE") return "8";
    return std::nullopt;
  };
  CpuShare s = ComputeCpuShare(in);
  EXPECT_TRUE(s.pinned);
  EXPECT_EQ(s.cores, 2);
  EXPECT_EQ(s.ToString(),
            "2 cores: affinity 2 of 16, no quota, 8 local ranks (LOCAL_WORLD_SIZE), mask pinned to this rank: "
            "not divided");
  // A cpuset narrowed for the whole container is shared, not pinned.
  Write("sys/fs/cgroup/kubepods/pod1/ctr/cpuset.cpus.effective", "4-5\n");
  s = ComputeCpuShare(in);
  EXPECT_FALSE(s.pinned);
  EXPECT_EQ(s.offered, 2);
  EXPECT_EQ(s.cores, 1);
}

TEST_F(CpuShareTest, CpuLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList(""), std::vector<int>{});
  EXPECT_EQ(ParseCpuList("3-1"), std::nullopt);
  EXPECT_EQ(ParseCpuList("a"), std::nullopt);
}

TEST(CurrentCpuShareTest, CountsThisProcessesMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const CpuShare s = CurrentCpuShare();
  EXPECT_EQ(s.affinity, CPU_COUNT(&set));
  EXPECT_GE(s.cores, 1);
  EXPECT_LE(s.cores, s.affinity);
}

}  // namespace
}  // namespace stoker
