// observe/batch_monitor.h — the three golden numbers per batch, slow batches
// with a cause drawn from stage evidence, and a bottleneck verdict.
//
// A training loop's input either keeps up or it does not. Per batch the
// consumer feeds three times: how long it waited for the batch (t_wait), how
// long the host-to-device copy took (t_h2d, 0 without a device) and how long
// its step took (t_compute). Over a rolling window (default 50 batches) the
// monitor derives mean/std/p50/p95/p99/min/max of t_wait, the pipeline
// efficiency t_compute / (t_wait + t_h2d + t_compute) and the verdict
// t_wait + t_h2d < t_compute.
//
// Why evidence and not guesses: the logs users bring ("[SLOW BATCH #2950]
// 20.69s - prefetch_buffer_exhausted") name a cause nobody measured. Here a
// batch may come with StageEvidence — the difference of two RecorderSnapshots
// taken around the wait, plus the gauges at the request — and the cause is
// read from it: remote requests retried during the wait is remote retries
// (remote throttling when most were 429/503 answers), readers busy and
// decoders starved is a storage stall,
// decoders saturated while readers block on the decode queue is decode-bound,
// an empty ready queue with no stage saturated is a drained prefetch, read
// latencies jumping from µs to ms is a cold page cache, and an engine that had
// the batch long before Python got it is consumer-side (GIL, Python work).
// Without evidence (a wrapped torch DataLoader) the cause says so.
//
// Costs: OnWait is O(log window) (the slow threshold's median is kept in two
// sorted halves of the window; one set node a batch, the oldest's freed);
// Stats and Diagnose are O(window log window), once a summary.
//
// Thread-safety: none inside. A monitor belongs to the one thread that
// consumes batches (the training loop); callers that share one serialise.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "observe/histogram.h"
#include "observe/recorder.h"
#include "stoker/status.h"

namespace stoker {

struct MonitorOptions {
  int window = 50;                 // batches in the rolling window
  double slow_factor = 5.0;        // slow: wait > slow_factor × rolling median ...
  double slow_floor_s = 0.05;      // ... and > this floor (a 3 ms blip is never "slow")
  int min_history = 5;             // batches seen before any is judged slow (the first waits for the fill)
  double healthy_efficiency = 0.9; // efficiency at or above which the input is "healthy"
  double busy_threshold = 0.7;     // a stage busier than this fraction of its threads is saturated
  // A mixture's source names, in source order (RecorderSnapshot::source_reads):
  // a storage-bound wait then names the source whose reads took most of it.
  std::vector<std::string> source_names;

  Status Validate() const;
};

// What the stages did between two snapshots (counters: differences; gauges:
// values at the request, summed over `requests` so evidence of many batches
// adds up and the gauge helpers return means).
struct StageEvidence {
  double window_s = 0;                   // wall time covered
  double read_busy_s = 0;                // readers in pread (throttle waits included: storage is slow)
  std::vector<double> source_read_busy_s;  // read_busy_s by a mixture's source (else empty)
  double decode_busy_s = 0;              // decoders decoding
  uint64_t reads = 0, decodes = 0, read_bytes = 0;
  double read_queue_get_wait_s = 0;      // readers idle: nothing scheduled (buffers all taken)
  double decode_queue_put_wait_s = 0;    // readers blocked: decoders are behind
  double decode_queue_get_wait_s = 0;    // decoders starved: reads are behind
  double pool_wait_s = 0;                // scheduler waited for a free batch buffer: consumer is slower
  // Share of the machine's CPU time over the window that was busy, and the
  // part of it other processes took; 0 without machine figures.
  double MachineBusy() const;
  double OthersCpu() const;
  // Other processes' share of the CPUs this process may use (the machine
  // figures cover only those).
  double OthersOnOurCpus() const;
  double process_cpu_s = 0;              // this process's CPU time over the window
  double machine_busy_s = 0;             // every process's (the machine's busy CPU time) ...
  double machine_window_s = 0;           // ... over this long (its reads lag the window by up to 20 ms)
  int machine_cpus = 0;                  // 0: no machine figure (not Linux): no contention evidence
  int machine_allowed_cpus = 0;          // the CPUs this process may run on, which the busy time covers (0: all)
  // Seconds this process's threads spent runnable, waiting for a CPU, over the
  // window (summed over threads); unknown (no schedstat): no evidence either way.
  double run_delay_s = 0;
  bool run_delay_known = false;
  double consumer_wait_s = 0;            // the engine's own measure of Next()'s wait
  std::array<uint64_t, LatencyHistogram::kBuckets> read_latency{};  // reads completed in the window
  // Remote storage in the window (process-wide counters, see stoker/stats.h).
  uint64_t remote_requests = 0, remote_retries = 0, remote_throttled = 0, remote_failures = 0;
  uint64_t cache_hits = 0, cache_misses = 0;
  // Seconds of the window with remote faults and no success; requests still
  // retrying when the batch arrived; the last fault.
  int64_t remote_retrying = 0;
  double remote_outage_s = 0;
  std::string remote_last_fault;
  std::array<uint64_t, 16> remote_latency_ms_log2{};  // bucket i: requests under 2^i ms
  // Gauges at the request, summed over requests.
  int requests = 0;
  double batches_ready = 0, batches_in_progress = 0, reads_in_flight = 0, decodes_in_flight = 0,
         decode_queue_depth = 0;
  int requests_with_none_ready = 0;
  int io_depth = 0, decode_threads = 0;  // the configuration (latest)

  // `before` is taken just before the request, `after` once the batch arrived.
  static StageEvidence Between(const RecorderSnapshot& before, const RecorderSnapshot& after);
  StageEvidence& operator+=(const StageEvidence& other);

  // Fractions in [0, 1]. Busy time is credited when a read or decode ends, so
  // a window shorter than one read may see none of it: the in-flight gauge at
  // the request covers that case, and the larger of the two counts.
  double ReadUtilisation() const;
  double DecodeUtilisation() const;
  double DecodersStarved() const;   // share of decoder time spent waiting for reads
  double ReadersBlocked() const;    // share of reader time spent waiting for decoders
  double ReadLatencyP50() const { return Percentile(0.5); }
  double Percentile(double q) const;
  double ReadMBps() const { return window_s > 0 ? static_cast<double>(read_bytes) / window_s / 1e6 : 0; }
  // Upper bound of the bucket holding the q-quantile of remote request latency, in ms (0: none).
  double RemoteLatencyMs(double q) const;
};

enum class SlowCause : uint8_t {
  kStorageStall,
  kColdPageCache,
  kDecodeBound,
  kPrefetchDrained,
  kConsumerSide,
  kRemoteRetries,    // remote requests failed and were retried (resets, 5xx, deadlines) during the wait
  kRemoteThrottled,  // ... mostly because the server answered 429 / 503
  kRemoteOutage,     // no remote request has succeeded for a second or more: the store is down
  kCpuContention,    // the machine's cores were busy, much of it with other processes: threads waited for a CPU
  kNoEvidence,  // a wrapped iterable: timing alone
  kUnknown,     // evidence present but inconclusive
};
const char* SlowCauseName(SlowCause cause);

enum class Bottleneck : uint8_t {
  kNone,          // no batches yet
  kConsumer,      // healthy: the input keeps up, the step is the bottleneck
  kStorage,
  kDecode,
  kPipeline,      // input-bound, no single stage saturated: prefetch drained
  kConsumerSide,  // the engine keeps up; Python between it and the loop does not
  kDeviceCopy,    // t_h2d dominates
  kCpuContention, // other processes hold the cores the loader's threads need
  kInput,         // input-bound, no stage evidence
  kUnknown,       // input-bound, evidence inconclusive
};
const char* BottleneckName(Bottleneck b);

// A cause with the evidence behind it, in words.
struct Diagnosis {
  SlowCause cause = SlowCause::kNoEvidence;
  std::string detail;
};

// Reads a cause from evidence. `python_wait_s` is the wait the consumer
// measured (compared with the engine's to find consumer-side stalls);
// `baseline_latency` holds earlier reads' latencies (for a cold page cache).
Diagnosis Classify(double python_wait_s, const StageEvidence& e,
                   const std::array<uint64_t, LatencyHistogram::kBuckets>* baseline_latency,
                   double busy_threshold);

struct SlowBatch {
  int64_t batch = 0;          // 0-based count of batches this monitor saw
  double wait_s = 0;
  double median_s = 0;        // rolling median of the earlier batches in the window
  double threshold_s = 0;     // max(slow_factor × median, floor)
  int64_t fast_before = 0;    // batches since the previous slow one (or since the start)
  Diagnosis diagnosis;
  // "[SLOW BATCH #2950] 20.69s - storage stall: ... (after 31 fast batches)"
  std::string Line() const;
};

struct WaitStats {
  int n = 0;
  double mean = 0, std = 0, min = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;  // seconds; std over n (ddof 0)
};

struct WindowStats {
  int batches = 0;             // in the window
  WaitStats wait;
  double mean_h2d_s = 0, mean_compute_s = 0;
  double efficiency = 0;       // Σt_compute / Σ(t_wait + t_h2d + t_compute)
  bool keeps_up = false;       // Σ(t_wait + t_h2d) < Σt_compute
  int slow_batches = 0;        // in the window
};

struct Totals {
  int64_t batches = 0, slow_batches = 0;
  double wait_s = 0, h2d_s = 0, compute_s = 0;
  double efficiency = 0;
};

struct Verdict {
  Bottleneck bottleneck = Bottleneck::kNone;
  bool healthy = false;       // keeps up with efficiency >= healthy_efficiency
  bool keeps_up = false;
  double efficiency = 0;
  std::string reason;         // the evidence, in words
  std::string recommendation; // the configuration change that addresses it
};

class BatchMonitor {
 public:
  static Result<BatchMonitor> Create(MonitorOptions options = {});

  // A batch arrived after the consumer waited `wait_s`. Judged at once (a slow
  // batch is returned exactly once, here). `evidence` is optional.
  std::optional<SlowBatch> OnWait(double wait_s, const StageEvidence* evidence = nullptr);
  // The device copy and the step of the latest batch; repeated calls add.
  void OnH2D(double seconds);
  void OnCompute(double seconds);

  // Over the window (call after the latest batch's OnCompute for complete records).
  WindowStats Stats() const;
  Totals totals() const { return totals_; }
  Verdict Diagnose() const;
  // "Recent 50 batches: avg=449.1ms, min=0.4ms, max=22409.4ms, std=3137.2ms | p50=..."
  std::string SummaryLine() const;

  // The latest batch's record (for a JSON-lines log); nullptr before the first.
  struct Record {
    int64_t batch = 0;
    double wait_s = 0, h2d_s = 0, compute_s = 0;
    bool slow = false;
    bool has_evidence = false;
    StageEvidence evidence;
  };
  const Record* Latest() const;
  const MonitorOptions& options() const { return options_; }

 private:
  explicit BatchMonitor(MonitorOptions options);
  Record& At(int i);              // i-th oldest record in the window
  const Record& At(int i) const;
  void InsertWait(double w);
  void EraseWait(double w);
  void Rebalance();
  double WindowMedian() const;

  MonitorOptions options_;
  std::vector<Record> ring_;      // grows to options_.window, oldest at head_
  int head_ = 0, size_ = 0;
  int64_t seen_ = 0;              // batches so far
  int64_t fast_since_slow_ = 0;
  Totals totals_;
  std::array<uint64_t, LatencyHistogram::kBuckets> latency_seen_{};  // every read in evidence so far
  mutable std::vector<double> scratch_;  // for percentiles; sized once
  // The window's waits in two sorted halves (the rolling median, see InsertWait).
  std::multiset<double> lo_, hi_;
};

}  // namespace stoker
