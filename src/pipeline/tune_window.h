// pipeline/tune_window.h — the online tuner's loop, the same for every
// loader (indexed or stream): evidence gathered window by window from the
// recorder, judged by the controller (autotune.h) at each window's end.
//
// A window ends when it is kWindowNs long and holds kWindowBatches batches
// and kWindowSamples samples (so a rate is not a count of three). A run's
// first window is not judged: it holds the start (the pipeline filling),
// not a steady state; a new run (an epoch chosen, a restore) starts over.
// Thread-safety: the consumer thread only (it calls Observe after each batch).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "observe/recorder.h"
#include "pipeline/autotune.h"

namespace stoker {

class TuneWindow {
 public:
  static constexpr uint64_t kWindowNs = 250'000'000;
  static constexpr uint64_t kWindowBatches = 3;
  static constexpr uint64_t kWindowSamples = 32;

  explicit TuneWindow(TuneConfig config) : tuner_(std::move(config)) {}

  // After each delivered batch. `run`: the running run's number (a new one
  // begins a new window); `run_cpu_ns`: its threads' CPU so far (asked only
  // at a window's edge); `token_batch` > 0: a token run, whose samples are
  // its batches times this (its reads each fill a run of windows). Returns
  // the changes decided, for the caller to apply to its run.
  std::vector<TuneChange> Observe(const Recorder& rec, uint64_t run, const std::function<uint64_t()>& run_cpu_ns,
                                  int token_batch = 0);
  const TuneSettings& settings() const { return tuner_.settings(); }

 private:
  void Start(const Recorder& rec, uint64_t now, uint64_t run, uint64_t run_cpu_ns);

  Autotuner tuner_;
  uint64_t begin_ns_ = 0;
  RecorderSnapshot snap_;
  uint64_t process_cpu_ns_ = 0, run_cpu_ns_ = 0;
  bool judged_ = false;          // false: the run's first window, skipped
  uint64_t run_ = UINT64_MAX;    // the run the window measures
};

}  // namespace stoker
