// observe/recorder.h — what every stage of a loader did, measured as it ran.
//
// Stages (reader, decoder) add their busy time, items and bytes; queues add
// how long producers waited for room and consumers for work; gauges say how
// many items sit in each place right now. All of it is relaxed atomics — a
// few adds per sample — so recording stays on in production (the overhead
// benchmark compares it with recording off). A snapshot is plain values: the
// difference of two snapshots describes what happened between them, which is
// how a slow batch gets a cause drawn from evidence.
//
// Spans for a Chrome trace are kept only when tracing is on, in a bounded
// ring (oldest dropped, drops counted), so memory stays bounded.
// Thread-safety: every member may be used from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "observe/clock.h"
#include "observe/histogram.h"
#include "stoker/stats.h"

namespace stoker {

// Items, bytes and busy time of one stage.
struct StageCounters {
  std::atomic<uint64_t> items{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> busy_ns{0};
  void Add(uint64_t n_bytes, uint64_t ns) {
    items.fetch_add(1, std::memory_order_relaxed);
    bytes.fetch_add(n_bytes, std::memory_order_relaxed);
    busy_ns.fetch_add(ns, std::memory_order_relaxed);
  }
};

// Time spent blocked on one queue, on each side.
struct QueueCounters {
  std::atomic<uint64_t> put_wait_ns{0};  // producers waiting for room: the next stage is slower
  std::atomic<uint64_t> get_wait_ns{0};  // consumers waiting for work: the previous stage is slower
};

enum class SpanKind : uint8_t { kRead, kDecode, kWait, kBatch, kMap };
const char* SpanKindName(SpanKind kind);

struct Span {
  SpanKind kind;
  uint32_t thread;      // small id of the thread in this loader
  uint64_t begin_ns;
  uint64_t end_ns;
  int64_t batch;        // -1: not yet known (a stream's read, before the shuffle places it)
  int32_t slot;
};

// The thread id of the consumer's waits (the loader's Next), apart from the
// engine's threads (small ids from 0), in both modes.
inline constexpr uint32_t kConsumerThread = 999;

class Recorder {
 public:
  explicit Recorder(size_t trace_capacity = 0) : start_ns_(NowNs()), trace_capacity_(trace_capacity) {}

  StageCounters read, decode;
  StageCounters map;  // the user's per-sample function (pipeline/sample_map.h), inside decode's time
  QueueCounters read_queue, decode_queue;
  std::atomic<uint64_t> pool_wait_ns{0};
  std::atomic<uint64_t> consumer_wait_ns{0};
  std::atomic<uint64_t> batches_delivered{0};
  std::atomic<uint64_t> batches_carried{0};  // begun before their epoch was asked for (epoch_run.h)
  std::atomic<int64_t> reads_in_flight{0}, decodes_in_flight{0}, decode_queue_depth{0};
  std::atomic<int64_t> batches_ready{0}, batches_in_progress{0};
  std::atomic<int> io_depth{0}, decode_threads{0};
  LatencyHistogram read_latency;

  // A mixture's sources as runs of shards (the first shard of each, in
  // order): reads are then also counted by source. Call before any read.
  void SetSources(std::vector<uint32_t> first_shards);
  // Counts a read of `shard` to its source (none set: nothing).
  void AddSourceRead(uint32_t shard, uint64_t n_bytes, uint64_t ns);

  bool tracing() const { return trace_capacity_ > 0; }
  void AddSpan(const Span& span);
  void NameThread(uint32_t thread, std::string name);
  uint64_t start_ns() const { return start_ns_; }

  RecorderSnapshot Snapshot() const;
  // The spans recorded so far as Chrome trace JSON ({"traceEvents": [...]}),
  // which Perfetto and chrome://tracing open.
  std::string TraceJson() const;

 private:
  const uint64_t start_ns_;
  const size_t trace_capacity_;
  std::vector<uint32_t> source_first_shard_;        // set once, before the readers start
  std::unique_ptr<StageCounters[]> source_reads_;   // one per source
  mutable std::mutex spans_mu_;
  std::deque<Span> spans_;     // guarded by spans_mu_
  std::vector<std::pair<uint32_t, std::string>> thread_names_;  // guarded by spans_mu_
  uint64_t spans_dropped_ = 0; // guarded by spans_mu_
};

// Adds the time from construction to destruction to a counter.
class ScopedNs {
 public:
  explicit ScopedNs(std::atomic<uint64_t>* sink) : sink_(sink), begin_(NowNs()) {}
  ~ScopedNs() { sink_->fetch_add(NowNs() - begin_, std::memory_order_relaxed); }
  ScopedNs(const ScopedNs&) = delete;
  ScopedNs& operator=(const ScopedNs&) = delete;

 private:
  std::atomic<uint64_t>* sink_;
  uint64_t begin_;
};

}  // namespace stoker
