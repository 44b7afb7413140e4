#include "observe/batch_monitor.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <utility>

namespace stoker {

namespace {

double Clamp01(double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 0.0; }

// Linear interpolation between the two nearest ranks, as numpy.percentile's
// default, so a test can check the numbers with numpy. `v` must be sorted.
double SortedPercentile(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double HistogramPercentile(const std::array<uint64_t, LatencyHistogram::kBuckets>& counts, double q) {
  return LatencyHistogram::Percentile(std::vector<uint64_t>(counts.begin(), counts.end()), q);
}

uint64_t Total(const std::array<uint64_t, LatencyHistogram::kBuckets>& counts) {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

std::string Ms(double s) { return Format("%.1f ms", s * 1e3); }
std::string Pct(double f) { return Format("%.0f%%", f * 100); }

}  // namespace

Status MonitorOptions::Validate() const {
  if (window < 2) return InvalidArgument("monitor window must hold at least 2 batches");
  if (!(slow_factor >= 1)) return InvalidArgument("slow_factor must be >= 1");
  if (!(slow_floor_s >= 0)) return InvalidArgument("slow_floor_s must be >= 0");
  if (min_history < 1) return InvalidArgument("min_history must be >= 1");
  if (!(healthy_efficiency > 0 && healthy_efficiency <= 1)) return InvalidArgument("healthy_efficiency must be in (0, 1]");
  if (!(busy_threshold > 0 && busy_threshold <= 1)) return InvalidArgument("busy_threshold must be in (0, 1]");
  return Status::Ok();
}

// ---- evidence ---------------------------------------------------------------

StageEvidence StageEvidence::Between(const RecorderSnapshot& before, const RecorderSnapshot& after) {
  StageEvidence e;
  // Counters only grow; a snapshot pair from different loaders would not, so clamp.
  auto d = [](double a, double b) { return std::max(0.0, b - a); };
  auto du = [](uint64_t a, uint64_t b) { return b > a ? b - a : 0; };
  // Per-bin difference of two histograms; a bin a snapshot lacks counts as empty.
  auto bins = [&du](const auto& a, const auto& b, auto& out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = du(i < a.size() ? a[i] : 0, i < b.size() ? b[i] : 0);
  };
  e.window_s = d(before.time_s, after.time_s);
  e.read_busy_s = d(before.read.busy_s, after.read.busy_s);
  if (before.source_reads.size() == after.source_reads.size()) {
    for (size_t i = 0; i < after.source_reads.size(); ++i) {
      e.source_read_busy_s.push_back(d(before.source_reads[i].busy_s, after.source_reads[i].busy_s));
    }
  }
  e.decode_busy_s = d(before.decode.busy_s, after.decode.busy_s);
  e.reads = du(before.read.items, after.read.items);
  e.decodes = du(before.decode.items, after.decode.items);
  e.read_bytes = du(before.read.bytes, after.read.bytes);
  e.read_queue_get_wait_s = d(before.read_queue_get_wait_s, after.read_queue_get_wait_s);
  e.decode_queue_put_wait_s = d(before.decode_queue_put_wait_s, after.decode_queue_put_wait_s);
  e.decode_queue_get_wait_s = d(before.decode_queue_get_wait_s, after.decode_queue_get_wait_s);
  e.pool_wait_s = d(before.pool_wait_s, after.pool_wait_s);
  e.process_cpu_s = d(before.process_cpu_s, after.process_cpu_s);
  e.machine_busy_s = d(before.machine_busy_s, after.machine_busy_s);
  e.machine_window_s = d(before.machine_read_at_s, after.machine_read_at_s);
  e.machine_cpus = after.machine_cpus;
  e.machine_allowed_cpus = after.machine_allowed_cpus;
  e.run_delay_known = before.run_delay_s >= 0 && after.run_delay_s >= 0;
  if (e.run_delay_known) e.run_delay_s = d(before.run_delay_s, after.run_delay_s);
  e.consumer_wait_s = d(before.consumer_wait_s, after.consumer_wait_s);
  bins(before.read_latency, after.read_latency, e.read_latency);
  e.remote_requests = du(before.remote_requests, after.remote_requests);
  e.remote_retries = du(before.remote_retries, after.remote_retries);
  e.remote_throttled = du(before.remote_throttled, after.remote_throttled);
  e.remote_failures = du(before.remote_failures, after.remote_failures);
  e.cache_hits = du(before.cache_hits, after.cache_hits);
  e.cache_misses = du(before.cache_misses, after.cache_misses);
  e.remote_retrying = after.remote_retrying;
  e.remote_outage_s = d(before.remote_outage_s, after.remote_outage_s);
  e.remote_last_fault = after.remote_last_fault;
  bins(before.remote_latency_ms_log2, after.remote_latency_ms_log2, e.remote_latency_ms_log2);
  // Recording off (no configuration in the snapshot): no evidence.
  if (after.io_depth <= 0 && after.decode_threads <= 0) return StageEvidence{};
  e.requests = 1;
  e.batches_ready = static_cast<double>(before.batches_ready);
  e.batches_in_progress = static_cast<double>(before.batches_in_progress);
  e.reads_in_flight = static_cast<double>(before.reads_in_flight);
  e.decodes_in_flight = static_cast<double>(before.decodes_in_flight);
  e.decode_queue_depth = static_cast<double>(before.decode_queue_depth);
  e.requests_with_none_ready = before.batches_ready <= 0 ? 1 : 0;
  e.io_depth = after.io_depth;
  e.decode_threads = after.decode_threads;
  return e;
}

StageEvidence& StageEvidence::operator+=(const StageEvidence& o) {
  window_s += o.window_s;
  read_busy_s += o.read_busy_s;
  if (source_read_busy_s.size() < o.source_read_busy_s.size()) source_read_busy_s.resize(o.source_read_busy_s.size());
  for (size_t i = 0; i < o.source_read_busy_s.size(); ++i) source_read_busy_s[i] += o.source_read_busy_s[i];
  decode_busy_s += o.decode_busy_s;
  reads += o.reads;
  decodes += o.decodes;
  read_bytes += o.read_bytes;
  read_queue_get_wait_s += o.read_queue_get_wait_s;
  decode_queue_put_wait_s += o.decode_queue_put_wait_s;
  decode_queue_get_wait_s += o.decode_queue_get_wait_s;
  pool_wait_s += o.pool_wait_s;
  process_cpu_s += o.process_cpu_s;
  machine_busy_s += o.machine_busy_s;
  machine_window_s += o.machine_window_s;
  machine_cpus = std::max(machine_cpus, o.machine_cpus);
  machine_allowed_cpus = std::max(machine_allowed_cpus, o.machine_allowed_cpus);
  if (o.run_delay_known) {  // one machine either has schedstat or not
    run_delay_s += o.run_delay_s;
    run_delay_known = true;
  }
  consumer_wait_s += o.consumer_wait_s;
  for (size_t i = 0; i < read_latency.size(); ++i) read_latency[i] += o.read_latency[i];
  remote_requests += o.remote_requests;
  remote_retries += o.remote_retries;
  remote_throttled += o.remote_throttled;
  remote_failures += o.remote_failures;
  cache_hits += o.cache_hits;
  cache_misses += o.cache_misses;
  remote_outage_s += o.remote_outage_s;
  remote_retrying = o.remote_retrying;  // a gauge: the latest
  if (!o.remote_last_fault.empty()) remote_last_fault = o.remote_last_fault;
  for (size_t i = 0; i < remote_latency_ms_log2.size(); ++i) remote_latency_ms_log2[i] += o.remote_latency_ms_log2[i];
  requests += o.requests;
  batches_ready += o.batches_ready;
  batches_in_progress += o.batches_in_progress;
  reads_in_flight += o.reads_in_flight;
  decodes_in_flight += o.decodes_in_flight;
  decode_queue_depth += o.decode_queue_depth;
  requests_with_none_ready += o.requests_with_none_ready;
  if (o.io_depth > 0) io_depth = o.io_depth;
  if (o.decode_threads > 0) decode_threads = o.decode_threads;
  return *this;
}

double StageEvidence::ReadUtilisation() const {
  if (io_depth <= 0) return 0;
  const double busy = window_s > 0 ? Clamp01(read_busy_s / (io_depth * window_s)) : 0;
  const double gauge = requests > 0 ? Clamp01(reads_in_flight / requests / io_depth) : 0;
  return std::max(busy, gauge);
}

double StageEvidence::DecodeUtilisation() const {
  if (decode_threads <= 0) return 0;
  const double busy = window_s > 0 ? Clamp01(decode_busy_s / (decode_threads * window_s)) : 0;
  const double gauge = requests > 0 ? Clamp01(decodes_in_flight / requests / decode_threads) : 0;
  return std::max(busy, gauge);
}

double StageEvidence::DecodersStarved() const {
  if (decode_threads <= 0 || window_s <= 0) return 0;
  return Clamp01(decode_queue_get_wait_s / (decode_threads * window_s));
}

double StageEvidence::ReadersBlocked() const {
  if (io_depth <= 0 || window_s <= 0) return 0;
  return Clamp01(decode_queue_put_wait_s / (io_depth * window_s));
}

double StageEvidence::Percentile(double q) const { return HistogramPercentile(read_latency, q); }

double StageEvidence::RemoteLatencyMs(double q) const {
  uint64_t total = 0;
  for (uint64_t n : remote_latency_ms_log2) total += n;
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t i = 0; i < remote_latency_ms_log2.size(); ++i) {
    seen += remote_latency_ms_log2[i];
    if (static_cast<double>(seen) >= rank && seen > 0) return static_cast<double>(uint64_t{1} << i);
  }
  return static_cast<double>(uint64_t{1} << (remote_latency_ms_log2.size() - 1));
}

// ---- causes -----------------------------------------------------------------

const char* SlowCauseName(SlowCause cause) {
  switch (cause) {
    case SlowCause::kStorageStall: return "storage stall";
    case SlowCause::kColdPageCache: return "cold page cache";
    case SlowCause::kDecodeBound: return "decode-bound";
    case SlowCause::kPrefetchDrained: return "prefetch drained";
    case SlowCause::kConsumerSide: return "consumer-side";
    case SlowCause::kRemoteRetries: return "remote retries";
    case SlowCause::kRemoteThrottled: return "remote throttling";
    case SlowCause::kRemoteOutage: return "remote outage";
    case SlowCause::kCpuContention: return "cpu contention";
    case SlowCause::kNoEvidence: return "unknown (no stage evidence)";
    case SlowCause::kUnknown: return "unknown";
  }
  return "?";
}

const char* BottleneckName(Bottleneck b) {
  switch (b) {
    case Bottleneck::kNone: return "none";
    case Bottleneck::kConsumer: return "consumer";
    case Bottleneck::kStorage: return "storage";
    case Bottleneck::kDecode: return "decode";
    case Bottleneck::kPipeline: return "pipeline";
    case Bottleneck::kConsumerSide: return "consumer-side";
    case Bottleneck::kDeviceCopy: return "h2d";
    case Bottleneck::kCpuContention: return "cpu contention";
    case Bottleneck::kInput: return "input";
    case Bottleneck::kUnknown: return "unknown";
  }
  return "?";
}

// The machine figures cover the CPUs this process may run on
// (machine_allowed_cpus of machine_cpus; observe/machine_cpu.h).
static int OurCpus(const StageEvidence& e) {
  return e.machine_allowed_cpus > 0 ? std::min(e.machine_allowed_cpus, e.machine_cpus) : e.machine_cpus;
}

double StageEvidence::MachineBusy() const {
  if (machine_cpus <= 0 || machine_window_s <= 0) return 0;
  return std::clamp(machine_busy_s / (machine_window_s * OurCpus(*this)), 0.0, 1.0);
}

double StageEvidence::OthersCpu() const {
  if (machine_cpus <= 0 || machine_window_s <= 0 || window_s <= 0) return 0;
  // Each over its own interval: the process's CPU clock is exact, the
  // machine's lags by up to one refresh.
  return std::clamp(MachineBusy() - process_cpu_s / (window_s * OurCpus(*this)), 0.0, 1.0);
}

double StageEvidence::OthersOnOurCpus() const { return OthersCpu(); }

namespace {

// The machine's cores nearly all busy during the wait, a good part of them
// with other processes: the loader's threads were runnable and waited for a
// CPU, so a stage's long busy time says nothing about that stage (a pread of
// cached pages "taking" 400 ms). /proc/stat counts in 10 ms ticks and is
// re-read every 20 ms, so under 50 ms between two reads it is no evidence.
// Where the kernel says how long the loader's threads queued for a CPU
// (run_delay.h), that queueing must also explain the stages' time: a quarter
// of a thread over the wait, and a third of the time the stages were busy.
// On a busy machine a reader asleep in a throttle or on a slow store is not
// runnable: its wait is the store's, though each wake-up queues a little.
bool CpuContended(const StageEvidence& e) {
  // A job pinned to some cores while other jobs fill the rest is not
  // contended: others count only for what must have run on its own cores.
  const bool busy =
      e.machine_cpus > 0 && e.machine_window_s >= 0.05 && e.MachineBusy() >= 0.85 && e.OthersOnOurCpus() >= 0.3;
  if (!busy || !e.run_delay_known) return busy;
  return e.run_delay_s >= 0.25 * e.window_s && e.run_delay_s >= (e.read_busy_s + e.decode_busy_s) / 3;
}

std::string CpuContentionDetail(const StageEvidence& e) {
  const int ours = OurCpus(e);
  return (ours == e.machine_cpus ? "the machine's " + std::to_string(ours) + " cores were "
                                 : "the " + std::to_string(ours) + " of the machine's " +
                                       std::to_string(e.machine_cpus) + " cores this process may use were ") +
         Pct(e.MachineBusy()) + " busy during the wait, other processes taking " +
         Format("%.1f cores", e.OthersCpu() * ours) + " of them and this one " +
         Format("%.1f", e.window_s > 0 ? e.process_cpu_s / e.window_s : 0.0) +
         (e.run_delay_known ? Format(", its threads queued %.2f s for a CPU", e.run_delay_s) : "") +
         ": the loader's threads waited for a CPU (no stage of its own was slow)";
}

// Storage, local or remote: the causes a mixture's slow source explains.
bool StorageCause(SlowCause c) {
  return c == SlowCause::kStorageStall || c == SlowCause::kColdPageCache || c == SlowCause::kRemoteOutage ||
         c == SlowCause::kRemoteRetries || c == SlowCause::kRemoteThrottled;
}

// "source 'web' took 83% of the read time": the source of a mixture whose
// reads took most of the readers' time over the evidence; empty where there
// is one source or no read time.
std::string SlowSource(const StageEvidence& e, const std::vector<std::string>& names) {
  if (names.size() < 2 || e.source_read_busy_s.size() != names.size()) return "";
  double total = 0;
  size_t top = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    total += e.source_read_busy_s[i];
    if (e.source_read_busy_s[i] > e.source_read_busy_s[top]) top = i;
  }
  if (total <= 0) return "";
  return "source '" + names[top] + "' took " + Pct(e.source_read_busy_s[top] / total) + " of the read time";
}

}  // namespace

Diagnosis Classify(double python_wait_s, const StageEvidence& e,
                   const std::array<uint64_t, LatencyHistogram::kBuckets>* baseline_latency,
                   double busy_threshold) {
  if (e.requests == 0) {
    return {SlowCause::kNoEvidence, "no stage evidence (a wrapped iterable): the loader delivered late"};
  }
  // Consumer-side first: if the engine handed the batch over quickly and
  // Python still waited, no stage of the pipeline is to blame.
  const double engine = e.consumer_wait_s;
  if (python_wait_s - engine >= 0.005 && engine < 0.5 * python_wait_s) {
    return {SlowCause::kConsumerSide,
            "the engine delivered after " + Ms(engine) + " but Python waited " + Ms(python_wait_s) +
                " (the GIL held by another thread, or Python work inside the iterator)"};
  }
  // A batch was ready when it was asked for: no stage kept it waiting. The
  // time went to handing it over, which only a busy machine or the
  // consumer's own process can stretch.
  if (e.requests_with_none_ready == 0 && e.batches_ready >= e.requests) {
    if (CpuContended(e)) return {SlowCause::kCpuContention, CpuContentionDetail(e)};
    return {SlowCause::kConsumerSide,
            Format("%.1f batches were ready at the request, so no stage held it; ",
                   e.batches_ready / std::max(1, e.requests)) +
                "the hand-over took " + Ms(engine) + " of the " + Ms(python_wait_s) +
                " (this process was not running: another of its threads, the GIL, or the system)"};
  }
  const double read_u = e.ReadUtilisation(), dec_u = e.DecodeUtilisation();
  const double starved = e.DecodersStarved(), blocked = e.ReadersBlocked();
  const double none_ready = e.requests > 0 ? static_cast<double>(e.requests_with_none_ready) / e.requests : 0;
  bool read_sat = read_u >= busy_threshold, dec_sat = dec_u >= busy_threshold;
  if (read_sat && dec_sat) {
    // Both busy: the stage the other one waits on is the bottleneck.
    if (starved > blocked) dec_sat = false; else read_sat = false;
  }
  const double p50 = e.ReadLatencyP50();
  // The store has not answered for a while: whatever else the stages show,
  // they wait on it. Named with how long and how many requests wait, so a
  // user tells an outage (wait it out) from a slow store (tune).
  if (e.remote_outage_s >= 1.0 && e.remote_outage_s >= 0.5 * e.window_s) {
    return {SlowCause::kRemoteOutage,
            Format("no remote request succeeded for %.1f s of the wait (", e.remote_outage_s) +
                std::to_string(e.remote_retries) + " retries; " + std::to_string(e.remote_retrying) +
                " requests still retrying)" + (e.remote_last_fault.empty() ? "" : "; last fault: " + e.remote_last_fault)};
  }
  // Remote requests retried while the consumer waited, and decode not the
  // stage that held it: each retry costs a backoff and a round trip, which
  // is what made this batch late. Throttling (429/503) is named apart: its
  // remedy is fewer requests (io_depth down, larger coalesced reads), not more.
  if (e.remote_retries > 0 && !dec_sat) {
    const bool throttled = e.remote_throttled * 2 >= e.remote_retries;
    return {throttled ? SlowCause::kRemoteThrottled : SlowCause::kRemoteRetries,
            std::to_string(e.remote_retries) + " remote requests retried during the wait (" +
                std::to_string(e.remote_throttled) + " answered 429/503" +
                (e.remote_failures ? ", " + std::to_string(e.remote_failures) + " spent their retry budget" : "") +
                ") of " + std::to_string(e.remote_requests) + " sent; request latency p50 under " +
                Format("%.0f ms", e.RemoteLatencyMs(0.5)) + ", readers " + Pct(read_u) + " busy (io_depth " +
                std::to_string(e.io_depth) + ")"};
  }
  if (CpuContended(e)) return {SlowCause::kCpuContention, CpuContentionDetail(e)};
  // A cold page cache: this window's reads took milliseconds where earlier
  // ones took microseconds — the same files, now coming from the device.
  if (baseline_latency != nullptr && e.reads >= 2 && Total(*baseline_latency) >= 16 && p50 >= 1e-3 &&
      (read_sat || starved >= 0.3 || none_ready >= 0.5)) {
    const double base = HistogramPercentile(*baseline_latency, 0.5);
    if (base < 0.25e-3) {
      return {SlowCause::kColdPageCache, "read latency p50 jumped from " + Format("%.0f us", base * 1e6) + " to " +
                                             Ms(p50) + " over " + std::to_string(e.reads) +
                                             " reads (pages no longer cached; readers " + Pct(read_u) + " busy)"};
    }
  }
  // Neither saturated, but one stage does nearly all the work: it is the
  // bottleneck, kept below full by hiccups (scheduling, a thin prefetch on a
  // busy machine). Adding to that stage still helps most.
  if (!read_sat && !dec_sat) {
    if (dec_u >= 0.5 && dec_u >= 3 * read_u) dec_sat = true;
    else if (read_u >= 0.5 && read_u >= 3 * dec_u) read_sat = true;
  }
  if (dec_sat) {
    return {SlowCause::kDecodeBound, "decoders " + Pct(dec_u) + " busy (decode_threads " +
                                         std::to_string(e.decode_threads) + "), readers blocked on the decode queue " +
                                         Pct(blocked) +
                                         " of the time (reads " + Pct(read_u) + " busy)"};
  }
  if (read_sat) {
    return {SlowCause::kStorageStall,
            "readers " + Pct(read_u) + " busy in pread (io_depth " + std::to_string(e.io_depth) + "), read p50 " +
                Ms(p50) + ", decoders starved " + Pct(starved) + " of the time, storage gave " +
                Format("%.1f MB/s", e.ReadMBps())};
  }
  if (none_ready >= 0.5) {
    return {SlowCause::kPrefetchDrained, "no batch ready at the request and no stage saturated (reads " + Pct(read_u) +
                                             ", decode " + Pct(dec_u) +
                                             " busy): the consumer outran the whole pipeline"};
  }
  return {SlowCause::kUnknown, "stage evidence inconclusive (reads " + Pct(read_u) + ", decode " + Pct(dec_u) +
                                   " busy, " + Format("%.1f", e.batches_ready / std::max(1, e.requests)) +
                                   " batches ready at the request)"};
}

std::string SlowBatch::Line() const {
  return Format("[SLOW BATCH #%lld] %.2fs - %s: ", static_cast<long long>(batch), wait_s,
                SlowCauseName(diagnosis.cause)) +
         diagnosis.detail + Format(" (after %lld fast batches)", static_cast<long long>(fast_before));
}

// ---- the monitor --------------------------------------------------------------

Result<BatchMonitor> BatchMonitor::Create(MonitorOptions options) {
  STOKER_RETURN_IF_ERROR(options.Validate());
  return BatchMonitor(options);
}

BatchMonitor::BatchMonitor(MonitorOptions options)
    : options_(options) {
  // The ring grows to the window as batches arrive: a large window (the bench
  // asks for 100,000) would otherwise cost tens of ms of zeroing before the
  // first batch.
  scratch_.reserve(static_cast<size_t>(std::min(options.window, 4096)));
}

BatchMonitor::Record& BatchMonitor::At(int i) { return ring_[(head_ + i) % options_.window]; }
const BatchMonitor::Record& BatchMonitor::At(int i) const { return ring_[(head_ + i) % options_.window]; }

// The two halves of the window's waits: lo_ the smaller ceil(n/2), hi_ the
// rest, so the median is at their edge. O(log window) a batch where sorting
// the window was O(window log window): with the bench's window of 100,000 a
// full window cost over 1 ms a batch.
void BatchMonitor::InsertWait(double w) {
  if (lo_.empty() || w <= *lo_.rbegin()) {
    lo_.insert(w);
  } else {
    hi_.insert(w);
  }
  Rebalance();
}

void BatchMonitor::EraseWait(double w) {
  // w is in the window: in lo_ when it is not above lo_'s largest.
  if (!lo_.empty() && w <= *lo_.rbegin()) {
    lo_.erase(lo_.find(w));
  } else {
    hi_.erase(hi_.find(w));
  }
  Rebalance();
}

void BatchMonitor::Rebalance() {
  if (lo_.size() > hi_.size() + 1) {
    auto last = std::prev(lo_.end());
    hi_.insert(*last);
    lo_.erase(last);
  } else if (hi_.size() > lo_.size()) {
    lo_.insert(*hi_.begin());
    hi_.erase(hi_.begin());
  }
}

// SortedPercentile(sorted waits, 0.5), the same arithmetic on the same two
// values, so the threshold is the one a sort gave.
double BatchMonitor::WindowMedian() const {
  if (lo_.empty()) return 0;
  const double a = *lo_.rbegin();
  if (lo_.size() > hi_.size()) return a + (a - a) * 0.0;  // odd: the middle one
  const double b = *hi_.begin();
  return a + (b - a) * 0.5;
}

const BatchMonitor::Record* BatchMonitor::Latest() const { return size_ == 0 ? nullptr : &At(size_ - 1); }

std::optional<SlowBatch> BatchMonitor::OnWait(double wait_s, const StageEvidence* evidence) {
  wait_s = std::max(0.0, wait_s);
  // The threshold comes from the batches before this one.
  std::optional<SlowBatch> slow;
  if (seen_ >= options_.min_history && size_ > 0) {
    const double median = WindowMedian();
    const double threshold = std::max(options_.slow_factor * median, options_.slow_floor_s);
    if (wait_s > threshold) {
      slow = SlowBatch{seen_, wait_s, median, threshold, fast_since_slow_, {}};
      slow->diagnosis = Classify(wait_s, evidence ? *evidence : StageEvidence{}, &latency_seen_,
                                 options_.busy_threshold);
      if (evidence && StorageCause(slow->diagnosis.cause)) {
        const std::string source = SlowSource(*evidence, options_.source_names);
        if (!source.empty()) slow->diagnosis.detail += "; " + source;
      }
      if (slow->diagnosis.cause == SlowCause::kNoEvidence) {
        slow->diagnosis.detail = Format("the input delivered %.0fx slower than the rolling median of %.1f ms "
                                        "(timing only: a wrapped iterable shows no stages)",
                                        median > 0 ? wait_s / median : 0.0, median * 1e3);
      }
    }
  }
  if (size_ == options_.window) {
    EraseWait(At(0).wait_s);
    head_ = (head_ + 1) % options_.window;
    --size_;
  }
  InsertWait(wait_s);
  if (static_cast<size_t>(size_) == ring_.size()) ring_.emplace_back();  // not yet full: head_ is 0
  Record& r = At(size_++);
  // A loader with recording off gives all-zero snapshots: no evidence at all.
  const bool has_evidence = evidence != nullptr && evidence->requests > 0;
  r = Record{seen_, wait_s, 0, 0, slow.has_value(), has_evidence, {}};
  if (has_evidence) {
    r.evidence = *evidence;
    for (size_t i = 0; i < latency_seen_.size(); ++i) latency_seen_[i] += evidence->read_latency[i];
  }
  ++seen_;
  fast_since_slow_ = slow ? 0 : fast_since_slow_ + 1;
  totals_.batches = seen_;
  totals_.wait_s += wait_s;
  if (slow) ++totals_.slow_batches;
  const double all = totals_.wait_s + totals_.h2d_s + totals_.compute_s;
  totals_.efficiency = all > 0 ? totals_.compute_s / all : 0;
  return slow;
}

void BatchMonitor::OnH2D(double seconds) {
  if (size_ == 0) return;
  seconds = std::max(0.0, seconds);
  At(size_ - 1).h2d_s += seconds;
  totals_.h2d_s += seconds;
  const double all = totals_.wait_s + totals_.h2d_s + totals_.compute_s;
  totals_.efficiency = all > 0 ? totals_.compute_s / all : 0;
}

void BatchMonitor::OnCompute(double seconds) {
  if (size_ == 0) return;
  seconds = std::max(0.0, seconds);
  At(size_ - 1).compute_s += seconds;
  totals_.compute_s += seconds;
  const double all = totals_.wait_s + totals_.h2d_s + totals_.compute_s;
  totals_.efficiency = all > 0 ? totals_.compute_s / all : 0;
}

WindowStats BatchMonitor::Stats() const {
  WindowStats s;
  s.batches = size_;
  if (size_ == 0) return s;
  double wait = 0, h2d = 0, compute = 0;
  scratch_.clear();
  for (int i = 0; i < size_; ++i) {
    const Record& r = At(i);
    wait += r.wait_s;
    h2d += r.h2d_s;
    compute += r.compute_s;
    s.slow_batches += r.slow ? 1 : 0;
    scratch_.push_back(r.wait_s);
  }
  const double n = size_;
  s.wait.n = size_;
  s.wait.mean = wait / n;
  double ss = 0;
  for (double w : scratch_) ss += (w - s.wait.mean) * (w - s.wait.mean);
  s.wait.std = std::sqrt(ss / n);
  std::sort(scratch_.begin(), scratch_.end());
  s.wait.min = scratch_.front();
  s.wait.max = scratch_.back();
  s.wait.p50 = SortedPercentile(scratch_, 0.50);
  s.wait.p95 = SortedPercentile(scratch_, 0.95);
  s.wait.p99 = SortedPercentile(scratch_, 0.99);
  s.mean_h2d_s = h2d / n;
  s.mean_compute_s = compute / n;
  const double all = wait + h2d + compute;
  s.efficiency = all > 0 ? compute / all : 0;
  s.keeps_up = wait + h2d < compute;
  return s;
}

Verdict BatchMonitor::Diagnose() const {
  Verdict v;
  if (size_ == 0) {
    v.reason = "no batches yet";
    return v;
  }
  const WindowStats s = Stats();
  v.keeps_up = s.keeps_up;
  v.efficiency = s.efficiency;
  const std::string per_batch = "per batch t_wait " + Ms(s.wait.mean) + ", t_h2d " + Ms(s.mean_h2d_s) +
                                ", t_compute " + Ms(s.mean_compute_s) + " (efficiency " + Pct(s.efficiency) +
                                " over " + std::to_string(s.batches) + " batches)";
  if (s.keeps_up && s.efficiency >= options_.healthy_efficiency) {
    v.bottleneck = Bottleneck::kConsumer;
    v.healthy = true;
    v.reason = "the input keeps up: t_wait + t_h2d < t_compute; " + per_batch;
    v.recommendation = "nothing to change in the input: the step is the bottleneck (prefetch or threads could "
                       "even be lowered to save memory and cores)";
    return v;
  }
  if (s.mean_h2d_s > s.wait.mean && s.mean_h2d_s > 0.1 * (s.wait.mean + s.mean_h2d_s + s.mean_compute_s)) {
    v.bottleneck = Bottleneck::kDeviceCopy;
    v.reason = "the host-to-device copy dominates the wait: " + per_batch;
    v.recommendation = "copy from pinned memory with non_blocking=True on a side stream, overlapping the step; "
                       "ship uint8 and normalise on the device to move fewer bytes";
    return v;
  }
  StageEvidence all;
  double python_wait = 0;
  for (int i = 0; i < size_; ++i) {
    const Record& r = At(i);
    if (!r.has_evidence) continue;
    all += r.evidence;
    python_wait += r.wait_s;
  }
  if (all.requests == 0) {
    v.bottleneck = Bottleneck::kInput;
    v.reason = "input-bound: the loader delivered slower than the step consumed; " + per_batch +
               " (no stage evidence: a wrapped iterable)";
    v.recommendation = "parallelise the input (more workers or threads, deeper prefetch), or load with "
                       "stoker.Loader to see which stage is short";
    return v;
  }
  // Earlier reads as the baseline for a cold cache would be all reads so far,
  // which includes this window; the verdict is about the steady state, so it
  // folds a cold cache into storage.
  Diagnosis d = Classify(python_wait, all, nullptr, options_.busy_threshold);
  const std::string source = StorageCause(d.cause) ? SlowSource(all, options_.source_names) : "";
  if (!source.empty()) d.detail += "; " + source;
  v.reason = std::string(s.keeps_up ? "the input barely keeps up: " : "input-bound: ") + d.detail + "; " + per_batch;
  switch (d.cause) {
    case SlowCause::kStorageStall:
    case SlowCause::kColdPageCache:
      v.bottleneck = Bottleneck::kStorage;
      v.recommendation = "storage is the bottleneck: raise io_depth (now " + std::to_string(all.io_depth) +
                         ") if the device has headroom — more reads in flight hide latency — else move the "
                         "shards to faster or local storage (decode threads will not help)";
      break;
    case SlowCause::kRemoteOutage:
      v.bottleneck = Bottleneck::kStorage;
      v.recommendation = "the remote store is not answering: requests retry until their deadline "
                         "(retry_deadline_s), so a short outage costs time, not the run; a local cache "
                         "(STOKER_CACHE_DIR) lets later epochs ride out outages";
      break;
    case SlowCause::kRemoteRetries:
    case SlowCause::kRemoteThrottled:
      v.bottleneck = Bottleneck::kStorage;
      v.recommendation = d.cause == SlowCause::kRemoteThrottled
                             ? "the remote store throttles (429/503): send fewer, larger requests (lower io_depth, "
                               "now " + std::to_string(all.io_depth) + "; coalesced reads), or add a local cache "
                               "(STOKER_CACHE_DIR) so later epochs read no remote byte"
                             : "remote requests fail and are retried: check the network path and the server; "
                               "a local cache (STOKER_CACHE_DIR) spares later epochs";
      break;
    case SlowCause::kDecodeBound:
      v.bottleneck = Bottleneck::kDecode;
      v.recommendation = "decode is the bottleneck: raise decode_threads (now " + std::to_string(all.decode_threads) +
                         ") up to the free cores, or decode smaller (a smaller target size lets JPEG decode "
                         "DCT-scaled); more io_depth will not help";
      break;
    case SlowCause::kPrefetchDrained:
      v.bottleneck = Bottleneck::kPipeline;
      v.recommendation = "no single stage is saturated: raise prefetch (whole batches decoded ahead) and io_depth "
                         "together so more work is in flight";
      break;
    case SlowCause::kCpuContention:
      v.bottleneck = Bottleneck::kCpuContention;
      v.recommendation = "other processes hold the cores this job needs: run fewer jobs beside it or give it "
                         "cores of its own (taskset, a cgroup quota); stoker sizes its threads to the cores it "
                         "is given (settings[\"cores\"]), so more threads will not help";
      break;
    case SlowCause::kConsumerSide:
      v.bottleneck = Bottleneck::kConsumerSide;
      v.recommendation = "the engine keeps up but Python receives batches late: move Python work out of the "
                         "loop and stop threads that hold the GIL";
      break;
    default:
      v.bottleneck = Bottleneck::kUnknown;
      v.recommendation = "collect a trace (trace_spans) to see which stage waits";
      break;
  }
  if (!source.empty()) v.recommendation += " (" + source + ": its storage is the one to speed up or cache)";
  return v;
}

std::string BatchMonitor::SummaryLine() const {
  const WindowStats s = Stats();
  const double ms = 1e3;
  return Format("Recent %d batches: avg=%.1fms, min=%.1fms, max=%.1fms, std=%.1fms | p50=%.1fms, p95=%.1fms, "
                "p99=%.1fms | compute avg=%.1fms, h2d avg=%.1fms | efficiency=%.1f%% | "
                "t_wait+t_h2d<t_compute: %s | slow=%d",
                s.batches, s.wait.mean * ms, s.wait.min * ms, s.wait.max * ms, s.wait.std * ms, s.wait.p50 * ms,
                s.wait.p95 * ms, s.wait.p99 * ms, s.mean_compute_s * ms, s.mean_h2d_s * ms, s.efficiency * 100,
                s.keeps_up ? "yes" : "no", s.slow_batches);
}

}  // namespace stoker
