#include "observe/batch_monitor.h"
#include "observe/machine_cpu.h"
#include "observe/run_delay.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace stoker {
namespace {

BatchMonitor Make(MonitorOptions o = {}) {
  Result<BatchMonitor> m = BatchMonitor::Create(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// numpy.percentile's default (linear between ranks), written independently.
double NumpyPercentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double rank = q * (v.size() - 1);
  size_t lo = static_cast<size_t>(rank);
  if (lo + 1 >= v.size()) return v.back();
  return v[lo] * (1 - (rank - lo)) + v[lo + 1] * (rank - lo);
}

// Evidence of one wait window, built from two synthetic snapshots.
StageEvidence Evidence(double window_s, double read_busy, double decode_busy, double decode_get_wait,
                       double decode_put_wait, int64_t ready, int64_t reads_in_flight, int64_t decodes_in_flight,
                       double consumer_wait, int io_depth = 4, int decode_threads = 2,
                       uint64_t latency_us = 0, uint64_t reads = 0) {
  RecorderSnapshot a, b;
  a.io_depth = b.io_depth = io_depth;
  a.decode_threads = b.decode_threads = decode_threads;
  a.read_latency.assign(LatencyHistogram::kBuckets, 0);
  b.read_latency.assign(LatencyHistogram::kBuckets, 0);
  a.time_s = 10;
  b.time_s = 10 + window_s;
  b.read.busy_s = read_busy;
  b.decode.busy_s = decode_busy;
  b.decode_queue_get_wait_s = decode_get_wait;
  b.decode_queue_put_wait_s = decode_put_wait;
  b.consumer_wait_s = consumer_wait;
  a.batches_ready = ready;
  a.reads_in_flight = reads_in_flight;
  a.decodes_in_flight = decodes_in_flight;
  b.read.items = reads;
  if (reads > 0) {
    LatencyHistogram h;
    for (uint64_t i = 0; i < reads; ++i) h.Record(latency_us * 1000);
    b.read_latency = h.Snapshot();
  }
  return StageEvidence::Between(a, b);
}

TEST(BatchMonitorTest, RollingStatsMatchADirectComputation) {
  MonitorOptions o;
  o.window = 50;
  BatchMonitor m = Make(o);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> wait(-4, 1.5);
  std::vector<double> waits, computes;
  for (int i = 0; i < 137; ++i) {
    double w = wait(rng), c = 0.02 + 0.001 * (i % 5);
    m.OnWait(w);
    m.OnH2D(0.001);
    m.OnCompute(c);
    waits.push_back(w);
    computes.push_back(c);
  }
  std::vector<double> last(waits.end() - 50, waits.end());
  std::vector<double> last_c(computes.end() - 50, computes.end());
  double mean = 0;
  for (double w : last) mean += w / 50;
  double var = 0;
  for (double w : last) var += (w - mean) * (w - mean) / 50;
  double sum_w = 0, sum_c = 0;
  for (int i = 0; i < 50; ++i) sum_w += last[i], sum_c += last_c[i];

  WindowStats s = m.Stats();
  EXPECT_EQ(s.batches, 50);
  EXPECT_NEAR(s.wait.mean, mean, 1e-12);
  EXPECT_NEAR(s.wait.std, std::sqrt(var), 1e-12);
  EXPECT_DOUBLE_EQ(s.wait.min, *std::min_element(last.begin(), last.end()));
  EXPECT_DOUBLE_EQ(s.wait.max, *std::max_element(last.begin(), last.end()));
  EXPECT_NEAR(s.wait.p50, NumpyPercentile(last, 0.50), 1e-12);
  EXPECT_NEAR(s.wait.p95, NumpyPercentile(last, 0.95), 1e-12);
  EXPECT_NEAR(s.wait.p99, NumpyPercentile(last, 0.99), 1e-12);
  EXPECT_NEAR(s.mean_h2d_s, 0.001, 1e-12);
  EXPECT_NEAR(s.efficiency, sum_c / (sum_w + 0.05 + sum_c), 1e-12);
  EXPECT_EQ(s.keeps_up, sum_w + 0.05 < sum_c);
  EXPECT_EQ(m.totals().batches, 137);

  // The summary line carries the same numbers, in the seeds' format.
  char expect[128];
  std::snprintf(expect, sizeof(expect), "Recent 50 batches: avg=%.1fms, min=%.1fms, max=%.1fms, std=%.1fms",
                mean * 1e3, s.wait.min * 1e3, s.wait.max * 1e3, std::sqrt(var) * 1e3);
  EXPECT_EQ(m.SummaryLine().rfind(expect, 0), 0u) << m.SummaryLine();
}

TEST(BatchMonitorTest, SlowNeedsBothTheFactorAndTheFloor) {
  MonitorOptions o;
  o.slow_factor = 5;
  o.slow_floor_s = 0.05;
  o.min_history = 5;
  BatchMonitor m = Make(o);
  // The first batches only build history, however long they wait (the fill).
  EXPECT_FALSE(m.OnWait(3.0));
  for (int i = 0; i < 9; ++i) EXPECT_FALSE(m.OnWait(0.002));
  // 20× the median but under the floor: not slow.
  EXPECT_FALSE(m.OnWait(0.04));
  // Over the floor but under 5× a median of 20 ms: not slow.
  BatchMonitor m2 = Make(o);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(m2.OnWait(0.02));
  EXPECT_FALSE(m2.OnWait(0.099));
  std::optional<SlowBatch> slow = m2.OnWait(0.101);
  ASSERT_TRUE(slow);
  EXPECT_NEAR(slow->median_s, 0.02, 1e-12);
  EXPECT_NEAR(slow->threshold_s, 0.1, 1e-12);
  EXPECT_EQ(slow->batch, 11);
  EXPECT_EQ(slow->fast_before, 11);
  EXPECT_EQ(slow->diagnosis.cause, SlowCause::kNoEvidence);
  // Reported once, and the fast count restarts after it (the seeds' 31-fast pattern).
  for (int i = 0; i < 31; ++i) EXPECT_FALSE(m2.OnWait(0.02));
  slow = m2.OnWait(20.69);
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->fast_before, 31);
  EXPECT_EQ(slow->Line().rfind("[SLOW BATCH #43] 20.69s - unknown (no stage evidence): ", 0), 0u) << slow->Line();
  EXPECT_NE(slow->Line().find("(after 31 fast batches)"), std::string::npos);
  EXPECT_EQ(m2.totals().slow_batches, 2);
}

TEST(BatchMonitorTest, CauseFromEvidence) {
  const double busy = 0.7;
  // Readers all in pread, decoders starved, nothing ready: storage.
  StageEvidence storage = Evidence(1.0, 4.0, 0.2, 1.8, 0.0, 0, 4, 0, 1.0, 4, 2, 50'000, 8);
  EXPECT_EQ(Classify(1.0, storage, nullptr, busy).cause, SlowCause::kStorageStall);
  // Decoders saturated, readers blocked on the decode queue: decode.
  StageEvidence decode = Evidence(1.0, 0.1, 2.0, 0.0, 3.5, 0, 0, 2, 1.0);
  EXPECT_EQ(Classify(1.0, decode, nullptr, busy).cause, SlowCause::kDecodeBound);
  // Both look busy: the stage the other waits on wins.
  StageEvidence both = Evidence(1.0, 3.6, 1.8, 0.0, 2.0, 0, 4, 2, 1.0);
  EXPECT_EQ(Classify(1.0, both, nullptr, busy).cause, SlowCause::kDecodeBound);
  // Decode at 60% while reads idle: decode dominates all the same.
  StageEvidence dominant = Evidence(1.0, 0.1, 0.6, 0.3, 0.5, 0, 0, 0, 1.0, 4, 1);
  EXPECT_EQ(Classify(1.0, dominant, nullptr, busy).cause, SlowCause::kDecodeBound);
  // Nothing saturated and the ready queue empty: prefetch drained.
  StageEvidence drained = Evidence(1.0, 1.0, 0.6, 0.5, 0.0, 0, 1, 0, 1.0);
  EXPECT_EQ(Classify(1.0, drained, nullptr, busy).cause, SlowCause::kPrefetchDrained);
  // The engine waited 1 ms, Python 300 ms: consumer-side.
  StageEvidence gil = Evidence(0.3, 0.0, 0.0, 0.6, 0.0, 2, 0, 0, 0.001);
  EXPECT_EQ(Classify(0.3, gil, nullptr, busy).cause, SlowCause::kConsumerSide);
  // Reads at 8 ms after a baseline of 3 µs reads: cold page cache.
  std::array<uint64_t, LatencyHistogram::kBuckets> baseline{};
  baseline[2] = 100;  // [2, 4) µs
  StageEvidence cold = Evidence(1.0, 3.9, 0.1, 1.9, 0.0, 0, 4, 0, 1.0, 4, 2, 8'000, 40);
  EXPECT_EQ(Classify(1.0, cold, &baseline, busy).cause, SlowCause::kColdPageCache);
  // The same reads against a slow baseline are plain storage.
  std::array<uint64_t, LatencyHistogram::kBuckets> slow_baseline{};
  slow_baseline[13] = 100;  // ~4-8 ms
  EXPECT_EQ(Classify(1.0, cold, &slow_baseline, busy).cause, SlowCause::kStorageStall);
  // Without evidence the cause says so.
  EXPECT_EQ(Classify(1.0, StageEvidence{}, nullptr, busy).cause, SlowCause::kNoEvidence);
  // The storage evidence with remote requests retried during the wait: named
  // for the retries, and for throttling when most were 429/503 answers.
  StageEvidence retried = storage;
  retried.remote_requests = 12, retried.remote_retries = 3, retried.remote_throttled = 0;
  retried.remote_latency_ms_log2[5] = 12;  // 16-32 ms
  Diagnosis r = Classify(1.0, retried, nullptr, busy);
  EXPECT_EQ(r.cause, SlowCause::kRemoteRetries);
  EXPECT_NE(r.detail.find("3 remote requests retried"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("p50 under 32 ms"), std::string::npos) << r.detail;
  retried.remote_throttled = 3;
  EXPECT_EQ(Classify(1.0, retried, nullptr, busy).cause, SlowCause::kRemoteThrottled);
  // Retries while decode held the batch: decode-bound still.
  StageEvidence decode_retried = decode;
  decode_retried.remote_retries = 2;
  EXPECT_EQ(Classify(1.0, decode_retried, nullptr, busy).cause, SlowCause::kDecodeBound);
  // Snapshots of a loader with recording off carry no evidence either.
  EXPECT_EQ(StageEvidence::Between(RecorderSnapshot{}, RecorderSnapshot{}).requests, 0);
}

TEST(BatchMonitorTest, ABusyMachineIsNotASlowStage) {
  const double busy = 0.7;
  // The storage evidence above (readers all "in pread", 393 ms a read), on
  // a 2-core machine 100% busy during the 1 s wait, 1.6 cores of it other
  // processes': the threads waited for a CPU, storage was not slow.
  StageEvidence contended = Evidence(1.0, 4.0, 0.2, 1.8, 0.0, 0, 4, 0, 1.0, 4, 2, 393'000, 8);
  contended.machine_cpus = 2;
  contended.machine_window_s = 1.0;
  contended.machine_busy_s = 2.0;
  contended.process_cpu_s = 0.4;
  Diagnosis d = Classify(1.0, contended, nullptr, busy);
  EXPECT_EQ(d.cause, SlowCause::kCpuContention);
  EXPECT_NE(d.detail.find("2 cores were 100% busy"), std::string::npos) << d.detail;
  EXPECT_NE(d.detail.find("other processes taking 1.6 cores"), std::string::npos) << d.detail;
  // The same busy machine, all of it this process's own: the stage evidence decides.
  StageEvidence own = contended;
  own.process_cpu_s = 2.0;
  EXPECT_EQ(Classify(1.0, own, nullptr, busy).cause, SlowCause::kStorageStall);
  // Half the cores idle: no contention, whoever used the rest.
  StageEvidence idle = contended;
  idle.machine_busy_s = 1.0;
  EXPECT_EQ(Classify(1.0, idle, nullptr, busy).cause, SlowCause::kStorageStall);
  // Pinned to one of two cores, the figures cover that core: busy the
  // whole second, 0.4 s of it this process's: contended. All of it its own:
  // not, whatever the other core does.
  StageEvidence pinned = contended;
  pinned.machine_allowed_cpus = 1;
  pinned.machine_busy_s = 1.0;
  Diagnosis p = Classify(1.0, pinned, nullptr, busy);
  EXPECT_EQ(p.cause, SlowCause::kCpuContention);
  EXPECT_NE(p.detail.find("the 1 of the machine's 2 cores this process may use were 100% busy"), std::string::npos)
      << p.detail;
  pinned.process_cpu_s = 1.0;
  EXPECT_EQ(Classify(1.0, pinned, nullptr, busy).cause, SlowCause::kStorageStall);
  // No machine figures (not Linux): no contention evidence.
  StageEvidence unknown = contended;
  unknown.machine_cpus = 0;
  EXPECT_EQ(Classify(1.0, unknown, nullptr, busy).cause, SlowCause::kStorageStall);
  // The kernel's run-queue figures decide where it has them: the 4.2 s the
  // stages were busy, 3 s of it queued for a CPU, were the machine's ...
  StageEvidence queued = contended;
  queued.run_delay_known = true;
  queued.run_delay_s = 3.0;
  Diagnosis q = Classify(1.0, queued, nullptr, busy);
  EXPECT_EQ(q.cause, SlowCause::kCpuContention);
  EXPECT_NE(q.detail.find("its threads queued 3.00 s for a CPU"), std::string::npos) << q.detail;
  // ... threads that queued little of it (readers asleep on a throttled
  // store, each wake-up queueing a moment) were not: the store is named.
  StageEvidence asleep = queued;
  asleep.run_delay_s = 0.9;
  EXPECT_EQ(Classify(1.0, asleep, nullptr, busy).cause, SlowCause::kStorageStall);
}

TEST(RunDelayTest, ParsesASchedstatLine) {
  auto wait = ParseSchedstatWait("2357253 1500000000 17\n");
  ASSERT_TRUE(wait);
  EXPECT_DOUBLE_EQ(*wait, 1.5);
  EXPECT_FALSE(ParseSchedstatWait("2357253\n"));
  EXPECT_FALSE(ParseSchedstatWait(""));
}

TEST(RunDelayTest, CountsThreadsQueuedForOneCpu) {
  const std::optional<double> before = ProcessRunDelaySeconds();
  if (!before) GTEST_SKIP() << "no /proc/self/task/*/schedstat here (not Linux, or no CONFIG_SCHED_INFO)";
  // Three threads spinning on one CPU for 300 ms: two of them wait at any
  // time, about 0.6 s of queueing in all; a tenth of that is asked for.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < 3; ++i) {
    spinners.emplace_back([&stop] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(0, &one);
      ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Read while the spinners live: an exited thread takes its count along.
  std::this_thread::sleep_for(std::chrono::nanoseconds(kRunDelayRefreshNs));
  const std::optional<double> after = ProcessRunDelaySeconds();
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_TRUE(after);
  EXPECT_GE(*after - *before, 0.06);
}

TEST(BatchMonitorTest, ABatchReadyAtTheRequestIsNotTheLoadersSlowBatch) {
  const double busy = 0.7;
  // One batch ready when asked for, yet the engine's hand-over took 400 ms
  // of a 410 ms wait, with stages that look inconclusive: not the pipeline's.
  StageEvidence ready = Evidence(0.41, 0.2, 0.3, 0.1, 0.0, 1, 0, 0, 0.4);
  Diagnosis d = Classify(0.41, ready, nullptr, busy);
  EXPECT_EQ(d.cause, SlowCause::kConsumerSide);
  EXPECT_NE(d.detail.find("1.0 batches were ready at the request"), std::string::npos) << d.detail;
  // The same on a machine other processes hold: contention, said so.
  ready.machine_cpus = 2;
  ready.machine_window_s = 0.4;  // the machine's two reads, 10 ms apart from the wait's ends
  ready.machine_busy_s = 0.8;
  ready.process_cpu_s = 0.1;
  EXPECT_EQ(Classify(0.41, ready, nullptr, busy).cause, SlowCause::kCpuContention);
}

TEST(MachineCpuTest, ParsesTheAggregateLine) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 100 Hz.
  auto busy = ParseProcStatBusy("cpu  100 20 30 5000 7 1 2 3 40 0", 100);
  ASSERT_TRUE(busy);
  EXPECT_DOUBLE_EQ(*busy, (100 + 20 + 30 + 1 + 2 + 3) / 100.0);  // guest is inside user; idle and iowait are not busy
  EXPECT_DOUBLE_EQ(*ParseProcStatBusy("cpu3 100 0 0 50 0 0 0 0", 100), 1.0);  // one CPU's line
  EXPECT_FALSE(ParseProcStatBusy("cpu  1 2", 100));
  EXPECT_FALSE(ParseProcStatBusy("intr 1 2 3 4", 100));
  // This machine's: busy time grows, never shrinks, and counts its CPUs.
  const MachineCpu now = MachineCpuTime();
  EXPECT_GT(now.cpus, 0);
  EXPECT_GT(now.busy_s, 0);
  EXPECT_GE(now.allowed_cpus, 1);
  EXPECT_LE(now.allowed_cpus, now.cpus);
}

TEST(BatchMonitorTest, SlowBatchCarriesItsEvidenceCause) {
  BatchMonitor m = Make();
  for (int i = 0; i < 10; ++i) {
    StageEvidence fast = Evidence(0.001, 0.0, 0.001, 0, 0, 2, 0, 1, 0.001);
    m.OnWait(0.001, &fast);
    m.OnCompute(0.05);
  }
  StageEvidence stall = Evidence(2.0, 8.0, 0.1, 3.9, 0, 0, 4, 0, 2.0);
  std::optional<SlowBatch> slow = m.OnWait(2.0, &stall);
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->diagnosis.cause, SlowCause::kStorageStall);
  EXPECT_NE(slow->Line().find("storage stall"), std::string::npos);
}

TEST(BatchMonitorTest, VerdictOverTheWindow) {
  // Healthy: waits tiny against the step.
  BatchMonitor healthy = Make();
  for (int i = 0; i < 60; ++i) {
    healthy.OnWait(0.0005);
    healthy.OnCompute(0.05);
  }
  Verdict v = healthy.Diagnose();
  EXPECT_EQ(v.bottleneck, Bottleneck::kConsumer);
  EXPECT_TRUE(v.healthy);
  EXPECT_GT(v.efficiency, 0.95);

  // Input-bound without evidence.
  BatchMonitor input = Make();
  for (int i = 0; i < 60; ++i) {
    input.OnWait(0.1);
    input.OnCompute(0.01);
  }
  v = input.Diagnose();
  EXPECT_EQ(v.bottleneck, Bottleneck::kInput);
  EXPECT_FALSE(v.keeps_up);

  // Storage and decode from evidence summed over the window.
  BatchMonitor storage = Make();
  BatchMonitor decode = Make();
  for (int i = 0; i < 60; ++i) {
    StageEvidence s = Evidence(0.1, 0.4, 0.01, 0.19, 0, 0, 4, 0, 0.1);
    storage.OnWait(0.1, &s);
    storage.OnCompute(0.01);
    StageEvidence d = Evidence(0.1, 0.0, 0.1, 0, 0.35, 0, 0, 1, 0.1, 4, 1);
    decode.OnWait(0.1, &d);
    decode.OnCompute(0.01);
  }
  EXPECT_EQ(storage.Diagnose().bottleneck, Bottleneck::kStorage);
  EXPECT_NE(storage.Diagnose().recommendation.find("io_depth (now 4)"), std::string::npos);
  EXPECT_EQ(decode.Diagnose().bottleneck, Bottleneck::kDecode);
  EXPECT_NE(decode.Diagnose().recommendation.find("decode_threads (now 1)"), std::string::npos);

  // The device copy dominating.
  BatchMonitor h2d = Make();
  for (int i = 0; i < 10; ++i) {
    h2d.OnWait(0.001);
    h2d.OnH2D(0.05);
    h2d.OnCompute(0.02);
  }
  EXPECT_EQ(h2d.Diagnose().bottleneck, Bottleneck::kDeviceCopy);
}

TEST(BatchMonitorTest, RejectsBadOptions) {
  MonitorOptions o;
  o.window = 1;
  EXPECT_FALSE(BatchMonitor::Create(o).ok());
  o = {};
  o.slow_factor = 0.5;
  EXPECT_FALSE(BatchMonitor::Create(o).ok());
}

// The slow threshold's median is kept as the window rolls (two sorted halves,
// not a sort per batch): equal to numpy's median of the window before each
// batch, for odd and even windows, repeated waits and every batch judged.
TEST(BatchMonitorTest, RollingMedianIsTheWindowsMedianAtEveryBatch) {
  for (int window : {2, 7, 8, 50}) {
    MonitorOptions o;
    o.window = window;
    o.slow_factor = 1;  // slow when above the median: about every other batch reports it
    o.slow_floor_s = 0;
    o.min_history = 1;
    BatchMonitor m = Make(o);
    std::mt19937 rng(window);
    std::vector<double> waits;
    int checked = 0;
    for (int i = 0; i < 600; ++i) {
      // Ties too: a few values repeat, so equal waits enter and leave both halves.
      const double w = (rng() % 4 == 0) ? 0.01 * static_cast<double>(rng() % 3) : (rng() % 100000) * 1e-6;
      std::optional<SlowBatch> slow = m.OnWait(w);
      if (slow) {
        const std::vector<double> before(waits.end() - std::min<size_t>(waits.size(), window), waits.end());
        EXPECT_DOUBLE_EQ(slow->median_s, NumpyPercentile(before, 0.5)) << "window " << window << " batch " << i;
        ++checked;
      }
      waits.push_back(w);
    }
    EXPECT_GT(checked, 100) << window;
  }
}

}  // namespace
}  // namespace stoker
