// pipeline/tune_window.cc — see tune_window.h.
#include "pipeline/tune_window.h"

#include <algorithm>

#include "observe/clock.h"
#include "observe/cpu_time.h"

namespace stoker {

void TuneWindow::Start(const Recorder& rec, uint64_t now, uint64_t run, uint64_t run_cpu_ns) {
  run_ = run;
  judged_ = true;
  begin_ns_ = now;
  snap_ = rec.Snapshot();
  process_cpu_ns_ = ProcessCpuTimeNs();
  run_cpu_ns_ = run_cpu_ns;
}

std::vector<TuneChange> TuneWindow::Observe(const Recorder& rec, uint64_t run,
                                            const std::function<uint64_t()>& run_cpu_ns, int token_batch) {
  const uint64_t now = NowNs();
  const uint64_t delivered = rec.batches_delivered.load(std::memory_order_relaxed);
  // A new run: its threads' CPU counts from zero.
  if (run != run_) {
    Start(rec, now, run, run_cpu_ns());
    judged_ = false;
    return {};
  }
  if (now - begin_ns_ < kWindowNs || delivered - snap_.batches_delivered < kWindowBatches) return {};
  const RecorderSnapshot snap = rec.Snapshot();
  const double samples = static_cast<double>(
      token_batch > 0 ? (snap.batches_delivered - snap_.batches_delivered) * static_cast<uint64_t>(token_batch)
                      : snap.decode.items - snap_.decode.items);
  if (samples < kWindowSamples) return {};
  if (!judged_) {  // the run's first window: its start, not judged
    Start(rec, now, run, run_cpu_ns());
    return {};
  }
  const uint64_t process_cpu = ProcessCpuTimeNs(), loader_cpu = run_cpu_ns();
  if (loader_cpu < run_cpu_ns_) {  // a thread ended (its clock is gone): no CPU evidence now
    Start(rec, now, run, loader_cpu);
    return {};
  }
  const RecorderSnapshot& a = snap_;
  TuneEvidence e;
  e.time_s = snap.time_s;
  e.wall_s = static_cast<double>(now - begin_ns_) * 1e-9;
  e.batches = static_cast<double>(snap.batches_delivered - a.batches_delivered);
  e.samples = samples;
  e.wait_frac = (snap.consumer_wait_s - a.consumer_wait_s) / e.wall_s;
  const double read_busy = snap.read.busy_s - a.read.busy_s;
  const uint64_t reads = snap.read.items - a.read.items;
  e.read_ms = reads ? read_busy * 1e3 / static_cast<double>(reads) : 0;
  e.read_util = read_busy / (std::max(1, snap.io_depth) * e.wall_s);
  e.decode_util = (snap.decode.busy_s - a.decode.busy_s) / (std::max(1, snap.decode_threads) * e.wall_s);
  const double cpu_ns =
      static_cast<double>(process_cpu - process_cpu_ns_) - static_cast<double>(loader_cpu - run_cpu_ns_);
  e.consumer_cores = std::max(0.0, cpu_ns * 1e-9 / e.wall_s);
  e.pool_wait_frac = (snap.pool_wait_s - a.pool_wait_s) / e.wall_s;
  std::vector<TuneChange> changes = tuner_.Decide(e);
  Start(rec, NowNs(), run, run_cpu_ns());
  return changes;
}

}  // namespace stoker
