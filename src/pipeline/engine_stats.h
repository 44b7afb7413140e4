// pipeline/engine_stats.h — what a loader keeps beside its runs, the same
// for every order source (indexed, stream):
//  * the recorder: stage counters, spans, the trace;
//  * the consumer's wait for the next batch: timed and traced as a wait
//    span, and held across polls that come back empty (NextWithin), so
//    timeout_ms counts from when the consumer began waiting for the batch;
//  * the online tuner (tune_window.h) with the log of its changes;
//  * what the loader reports: the snapshot with the device stage's and GPU
//    decode's counters, the settings every mode shares (knobs, cores, GPU
//    decode, upscales).
// And the checks of a saved state's envelope that every mode makes.
// Thread-safety: the loader's consumer thread; Snapshot and TraceJson from
// any (the recorder is internally synchronized).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "observe/clock.h"
#include "observe/recorder.h"
#include "pipeline/autotune.h"
#include "pipeline/dataset.h"
#include "pipeline/tune_window.h"
#include "stoker/loader.h"

namespace stoker {

class EngineStats {
 public:
  // Records when options.record_stats; tunes when options.autotune, with
  // recording (the tuner reads its evidence) and a knob that may move.
  EngineStats(const LoaderOptions& options, TuneConfig tune);

  Recorder* recorder() const { return recorder_.get(); }

  // A new run starts (an epoch chosen, a restore): the tuner's window and
  // the consumer's wait start over.
  void RunStarted() {
    ++run_generation_;
    waiting_since_.reset();
  }
  // The consumer waits for another batch than it did (an epoch carried over).
  void ResetWait() { waiting_since_.reset(); }

  // The consumer waits for batch `batch` (its number within the epoch):
  // `next(since)` is the run's NextReady, `since` when the consumer began
  // waiting for this batch. A null batch (the poll's wait ran out) keeps
  // `since` for the next poll.
  template <class Next>
  auto Wait(int64_t batch, Next&& next) {
    if (!waiting_since_) waiting_since_ = std::chrono::steady_clock::now();
    const uint64_t begin = NowNs();
    auto ready = next(*waiting_since_);
    if (recorder_) {
      const uint64_t end = NowNs();
      recorder_->consumer_wait_ns.fetch_add(end - begin, std::memory_order_relaxed);
      recorder_->AddSpan({SpanKind::kWait, kConsumerThread, begin, end, batch, -1});
    }
    if (!ready.ok() || *ready) waiting_since_.reset();
    return ready;
  }

  // After each delivered batch: the tuner's new settings for the running
  // run and every later one, or nullopt (no tuner, or no change).
  // `run_cpu_ns`: the running run's threads' CPU; `token_batch`: as TuneWindow::Observe's.
  std::optional<TuneSettings> Tune(const std::function<uint64_t()>& run_cpu_ns, int token_batch = 0);
  std::vector<TuneChange> TuneLog() const { return changes_; }
  std::vector<TuneChange> TakeTuneLog();

  // The recorder's snapshot (empty without one) with the device stage's and GPU decode's counters.
  RecorderSnapshot Snapshot(const EngineData& data) const;
  std::string TraceJson() const;
  // The settings every mode reports: the knobs in effect and their ranges,
  // cores, GPU decode's decoder and share (or why none), upscaled images.
  LoaderSettings Settings(const EngineData& data) const;

 private:
  std::unique_ptr<Recorder> recorder_;  // outlives the loader's run, whose threads record into it
  // When the consumer began waiting for the next batch, across NextWithin polls.
  std::optional<std::chrono::steady_clock::time_point> waiting_since_;
  // Tuning: the ranges, the controller with its window of evidence, every change made.
  TuneConfig tune_config_;
  std::optional<TuneWindow> tuner_;
  uint64_t run_generation_ = 0;  // counts the runs started
  std::vector<TuneChange> changes_;
  size_t changes_taken_ = 0;
};

// A saved state's integer `key`, or why not.
Result<int64_t> StateInteger(const nlohmann::json& state, const char* key);

// Each key of `mine` (this loader's value of it) holds the same integer in
// the saved state; else InvalidArgument naming the key, both values and
// `consequence` (appended after ": ", when not empty).
Status CheckSavedWith(const nlohmann::json& state, std::initializer_list<std::pair<const char*, int64_t>> mine,
                      const std::string& consequence = "");

}  // namespace stoker
