#include "observe/recorder.h"

#include "io/reader.h"
#include "observe/cpu_time.h"
#include "observe/machine_cpu.h"
#include "observe/run_delay.h"

#include <algorithm>
#include <cstdio>

namespace stoker {

const char* SpanKindName(SpanKind kind) {
  switch (kind) {
    case SpanKind::kRead: return "read";
    case SpanKind::kDecode: return "decode";
    case SpanKind::kWait: return "wait";
    case SpanKind::kBatch: return "batch";
    case SpanKind::kMap: return "map";
  }
  return "?";
}

void Recorder::AddSpan(const Span& span) {
  if (!tracing()) return;
  std::lock_guard lock(spans_mu_);
  if (spans_.size() >= trace_capacity_) {
    spans_.pop_front();
    ++spans_dropped_;
  }
  spans_.push_back(span);
}

void Recorder::NameThread(uint32_t thread, std::string name) {
  if (!tracing()) return;
  std::lock_guard lock(spans_mu_);
  for (auto& [id, n] : thread_names_)
    if (id == thread) return;
  thread_names_.emplace_back(thread, std::move(name));
}

void Recorder::SetSources(std::vector<uint32_t> first_shards) {
  source_reads_ = std::make_unique<StageCounters[]>(first_shards.size());
  source_first_shard_ = std::move(first_shards);
}

void Recorder::AddSourceRead(uint32_t shard, uint64_t n_bytes, uint64_t ns) {
  if (source_first_shard_.empty()) return;
  const auto it = std::upper_bound(source_first_shard_.begin(), source_first_shard_.end(), shard);
  source_reads_[static_cast<size_t>(std::max<ptrdiff_t>(1, it - source_first_shard_.begin()) - 1)].Add(n_bytes, ns);
}

RecorderSnapshot Recorder::Snapshot() const {
  auto secs = [](const std::atomic<uint64_t>& ns) { return static_cast<double>(ns.load(std::memory_order_relaxed)) * 1e-9; };
  auto stage = [&](const StageCounters& c) {
    return StageSnapshot{c.items.load(std::memory_order_relaxed), c.bytes.load(std::memory_order_relaxed),
                         secs(c.busy_ns)};
  };
  RecorderSnapshot s;
  s.time_s = static_cast<double>(NowNs() - start_ns_) * 1e-9;
  s.read = stage(read);
  s.decode = stage(decode);
  s.map = stage(map);
  for (size_t i = 0; i < source_first_shard_.size(); ++i) s.source_reads.push_back(stage(source_reads_[i]));
  s.read_queue_put_wait_s = secs(read_queue.put_wait_ns);
  s.read_queue_get_wait_s = secs(read_queue.get_wait_ns);
  s.decode_queue_put_wait_s = secs(decode_queue.put_wait_ns);
  s.decode_queue_get_wait_s = secs(decode_queue.get_wait_ns);
  s.pool_wait_s = secs(pool_wait_ns);
  s.consumer_wait_s = secs(consumer_wait_ns);
  s.batches_delivered = batches_delivered.load(std::memory_order_relaxed);
  s.batches_carried = batches_carried.load(std::memory_order_relaxed);
  s.reads_in_flight = reads_in_flight.load(std::memory_order_relaxed);
  s.decodes_in_flight = decodes_in_flight.load(std::memory_order_relaxed);
  s.decode_queue_depth = decode_queue_depth.load(std::memory_order_relaxed);
  s.batches_ready = batches_ready.load(std::memory_order_relaxed);
  s.batches_in_progress = batches_in_progress.load(std::memory_order_relaxed);
  s.io_depth = io_depth.load(std::memory_order_relaxed);
  s.decode_threads = decode_threads.load(std::memory_order_relaxed);
  s.process_cpu_s = static_cast<double>(ProcessCpuTimeNs()) * 1e-9;
  const MachineCpu machine = MachineCpuTime();
  s.machine_busy_s = machine.busy_s;
  s.machine_cpus = machine.cpus;
  s.machine_allowed_cpus = machine.allowed_cpus;
  s.machine_read_at_s = machine.read_at_s;
  s.run_delay_s = ProcessRunDelaySeconds().value_or(-1);
  s.read_latency = read_latency.Snapshot();
  IoCounters& io = GlobalIoCounters();
  s.remote_requests = io.requests.load(std::memory_order_relaxed);
  s.remote_retries = io.retries.load(std::memory_order_relaxed);
  s.remote_throttled = io.throttled.load(std::memory_order_relaxed);
  s.remote_failures = io.failures.load(std::memory_order_relaxed);
  s.remote_retrying = io.retrying.load(std::memory_order_relaxed);
  s.remote_outage_s = io.OutageSecondsTotal();
  if (s.remote_outage_s > 0) s.remote_last_fault = io.LastFault();
  s.cache_hits = io.cache_hits.load(std::memory_order_relaxed);
  s.cache_misses = io.cache_misses.load(std::memory_order_relaxed);
  s.remote_latency_ms_log2.resize(IoCounters::kBuckets);
  for (int i = 0; i < IoCounters::kBuckets; ++i)
    s.remote_latency_ms_log2[i] = io.latency_ms_log2[i].load(std::memory_order_relaxed);
  std::lock_guard lock(spans_mu_);
  s.spans_dropped = spans_dropped_;
  return s;
}

std::string Recorder::TraceJson() const {
  std::lock_guard lock(spans_mu_);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  char buf[256];
  bool first = true;
  for (const auto& [id, name] : thread_names_) {
    std::snprintf(buf, sizeof(buf), "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"%s\"}}",
                  first ? "" : ",", id, name.c_str());
    out += buf;
    first = false;
  }
  for (const Span& s : spans_) {
    // Complete events ("X") in microseconds since the recorder started; one
    // row per loader thread.
    std::snprintf(buf, sizeof(buf),
                  "%s{\"name\":\"%s\",\"cat\":\"stoker\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
                  "\"args\":{\"batch\":%lld,\"slot\":%d}}",
                  first ? "" : ",", SpanKindName(s.kind), s.thread,
                  static_cast<double>(s.begin_ns - start_ns_) * 1e-3,
                  static_cast<double>(s.end_ns - s.begin_ns) * 1e-3, static_cast<long long>(s.batch), s.slot);
    out += buf;
    first = false;
  }
  out += "]}";
  return out;
}

}  // namespace stoker
