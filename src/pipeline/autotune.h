// pipeline/autotune.h — the online controller: moves reads in flight,
// read-ahead, decode threads and prefetch from what the stages measured.
//
// The loader feeds it one window of evidence at a time (>= 0.25 s, 3 batches
// and 32 samples: tune_window.h, which engine_stats.h runs for both
// loaders), and applies what it returns to the running threads
// (EpochRun::Apply, StreamRun::Apply). What a knob changes is
// how much work runs at once, never which work: the plan fixes which samples
// come and in what order, seeds fix their bytes, so any setting at any moment
// gives the same stream.
//
// Rules, first match wins, one change per window:
//  1. CPU: the training process uses cores of its own (consumer_cores over
//     the time it does not wait for data), so decoders beyond the cores it
//     leaves free only contend with the step: decode_threads drops to
//     max(1, cores - the step's cores).
//  2. Reads bound: the consumer waits, readers are busy (each waits on
//     storage, at least kMinReadWaitMs a read) and decoders idle: io_depth
//     toward the bandwidth-delay product (doubled per step, up to its
//     maximum), read-ahead with it.
//  3. Decode bound: the consumer waits and decoders are saturated: one more
//     decode thread, up to the cores the step leaves free.
//  4. Buffers short: the consumer waits while neither stage is saturated
//     and the scheduler waited for a free batch buffer (pool_wait_frac):
//     one more batch of prefetch, within the memory budget. Without that
//     wait more buffers cannot help: idle stages then mean threads that
//     wait for a core (other processes' load), not for work.
// Every increase is a trial: the next window's sample rate must beat the
// window before by kMinGain, else the knob goes back and its maximum becomes
// the old value (a trial kept goes on at the next window). So each knob
// reverses at most a few times and can never oscillate: every revert lowers
// a ceiling, and ceilings never rise. After a
// change, kCooldownWindows windows pass before the next rule is tried. Rules
// 1 and 3 could still trade a decoder back and forth while the step's CPU
// use hovers at a boundary: a knob whose direction turned kMaxReversals
// times stays where it is.
// A knob the user set is fixed (min = max = that value).
// Thread-safety: none; the loader's consumer thread owns it.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "stoker/tuning.h"

namespace stoker {

enum class Knob : int { kIoDepth = 0, kReadAhead = 1, kDecodeThreads = 2, kPrefetch = 3 };
inline constexpr int kKnobs = 4;
const char* KnobName(Knob k);

// One value per knob.
struct TuneSettings {
  std::array<int, kKnobs> v{};
  int& operator[](Knob k) { return v[static_cast<int>(k)]; }
  int operator[](Knob k) const { return v[static_cast<int>(k)]; }
};

struct TuneConfig {
  TuneSettings start, min, max;  // a fixed knob has min == max == start
  std::array<bool, kKnobs> fixed{};
  std::array<bool, kKnobs> user_set{};  // fixed because the user passed it
  // Reads one batch costs (read_runs.h ReadsPerBatch): read-ahead follows
  // io_depth as ceil(io_depth / reads_per_batch) batches.
  int reads_per_batch = 1;
  int cores = 1;
  bool has_decoders = true;  // false for token windows (no decode stage)
};

// What the stages did over one window (differences of two snapshots).
struct TuneEvidence {
  double time_s = 0;          // the window's end, since the loader was made
  double wall_s = 0;          // the window's length
  double batches = 0;         // delivered in it
  // Samples decoded in it (token windows copied, for a token loader): the
  // rate a trial is judged on, finer-grained than whole batches.
  double samples = 0;
  double wait_frac = 0;       // of the wall time, the consumer waited in Next()
  double read_ms = 0;         // mean time one read took (latency, throttle included)
  double read_util = 0;       // read busy time / (readers × wall)
  double decode_util = 0;     // decode busy time / (decoders × wall)
  double consumer_cores = 0;  // CPU the process used outside the loader's threads / wall
  double pool_wait_frac = 0;  // of the wall time, the scheduler waited for a batch buffer (prefetch bound)
  double rate() const { return wall_s > 0 ? (samples > 0 ? samples : batches) / wall_s : 0; }
};

class Autotuner {
 public:
  static constexpr double kMinGain = 1.05;   // a trial must raise the sample rate by 5%
  static constexpr double kWaitFloor = 0.05; // the consumer waits more than this: input is short
  // A read shorter than this is a copy from memory (page cache, a token
  // corpus's map), not a wait: more reads in flight hide nothing, they only
  // add threads to the cores the copies already use.
  static constexpr double kMinReadWaitMs = 0.1;
  static constexpr int kCooldownWindows = 1;
  static constexpr int kMaxReversals = 4;

  explicit Autotuner(TuneConfig config);

  // Judges the window; returns the changes made (empty: none). The settings
  // it returns are within [min, max] of every knob.
  std::vector<TuneChange> Decide(const TuneEvidence& e);
  const TuneSettings& settings() const { return now_; }
  const TuneConfig& config() const { return config_; }

 private:
  struct Trial {
    TuneSettings before;
    double rate_before = 0;
    Knob knob;
  };
  // Sets knob k to `to` (clamped), recording the change; false if no change
  // (or the knob turned too often; `undo` restores a trial regardless).
  bool Set(Knob k, int to, const std::string& reason, double time_s, std::vector<TuneChange>* out,
           bool undo = false);
  // The read-ahead that keeps io_depth reads in flight, within its range.
  int ReadAheadFor(int io_depth) const;

  TuneConfig config_;
  TuneSettings now_;
  std::optional<Trial> trial_;
  std::array<int, kKnobs> last_dir_{};    // +1 / -1: the knob's last move
  std::array<int, kKnobs> reversals_{};
  int cooldown_ = 0;
};

}  // namespace stoker
