// pipeline/autotune.cc — the controller's rules; see autotune.h.
#include "pipeline/autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace stoker {

namespace {

std::string Pct(double f) { return std::to_string(static_cast<int>(std::lround(std::clamp(f, 0.0, 1.0) * 100))) + "%"; }

std::string Num(double x, const char* fmt) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

}  // namespace

const char* KnobName(Knob k) {
  switch (k) {
    case Knob::kIoDepth: return "io_depth";
    case Knob::kReadAhead: return "read_ahead_batches";
    case Knob::kDecodeThreads: return "decode_threads";
    case Knob::kPrefetch: return "prefetch";
  }
  return "?";
}

Autotuner::Autotuner(TuneConfig config) : config_(config), now_(config.start) {
  for (int i = 0; i < kKnobs; ++i) {
    const Knob k = static_cast<Knob>(i);
    if (config_.fixed[i]) config_.min[k] = config_.max[k] = config_.start[k];
    config_.max[k] = std::max(config_.max[k], config_.start[k]);
    config_.min[k] = std::min(config_.min[k], config_.start[k]);
  }
}

bool Autotuner::Set(Knob k, int to, const std::string& reason, double time_s, std::vector<TuneChange>* out,
                    bool undo) {
  if (!undo) to = std::clamp(to, config_.min[k], config_.max[k]);
  if (to == now_[k]) return false;
  const int i = static_cast<int>(k);
  const int dir = to > now_[k] ? 1 : -1;
  if (!undo && last_dir_[i] != 0 && dir != last_dir_[i]) {
    if (reversals_[i] >= kMaxReversals) return false;
    ++reversals_[i];
  }
  last_dir_[i] = dir;
  out->push_back(TuneChange{time_s, KnobName(k), now_[k], to, reason});
  now_[k] = to;
  return true;
}

int Autotuner::ReadAheadFor(int io_depth) const {
  const int reads = std::max(1, config_.reads_per_batch);
  return std::clamp((io_depth + reads - 1) / reads, config_.min[Knob::kReadAhead], config_.max[Knob::kReadAhead]);
}

std::vector<TuneChange> Autotuner::Decide(const TuneEvidence& e) {
  std::vector<TuneChange> out;
  const double t = e.time_s;
  if (trial_) {
    // The trial's verdict: kept if the sample rate rose, else undone for good.
    const Trial trial = *trial_;
    trial_.reset();
    const double rate = e.rate();
    // Kept: this window was the trial's, the next may try another step.
    if (rate >= trial.rate_before * kMinGain) return out;
    cooldown_ = kCooldownWindows;
    const std::string reason = "no gain (" + Num(trial.rate_before, "%.1f") + " \u2192 " + Num(rate, "%.1f") +
                               " samples/s), back and kept there";
    for (int i = 0; i < kKnobs; ++i) {
      const Knob k = static_cast<Knob>(i);
      if (trial.before[k] == now_[k]) continue;
      if (now_[k] > trial.before[k]) config_.max[k] = trial.before[k];  // never tried again
      Set(k, trial.before[k], reason, t, &out, /*undo=*/true);
    }
    return out;
  }
  if (cooldown_ > 0) {
    --cooldown_;
    return out;
  }
  const int cores = std::max(1, config_.cores);
  // The step's CPU while it runs: what the process used beyond the loader,
  // over the time the loop did not wait for data (a step starved of batches
  // uses less, which is no sign that it needs less: without this, a decoder
  // given up for the step came back as soon as the step waited, and went
  // again). Cores it leaves free: the rest, rounded. The running share is taken
  // as at least a quarter: CPU of another thread of the process (a logger, a
  // metrics exporter) beside a loop that waits nearly all the time is no step
  // that needs a core; divided by the few percent the loop ran, a twentieth of a
  // core read as a whole one and took a decoder.
  const double step_cores =
      std::min<double>(cores, e.consumer_cores / std::max(0.25, 1.0 - std::clamp(e.wait_frac, 0.0, 1.0)));
  const int free_cores = std::max(1, cores - static_cast<int>(std::lround(step_cores)));
  const bool waits = e.wait_frac > kWaitFloor;
  const std::string wait_note = "the step waited " + Pct(e.wait_frac) + " of the time";
  const std::string decode_note = config_.has_decoders ? ", decoders idle " + Pct(1 - e.decode_util) : "";

  // 1. CPU: decoders past the cores the step leaves free.
  if (config_.has_decoders && now_[Knob::kDecodeThreads] > free_cores && step_cores >= 0.5) {
    if (Set(Knob::kDecodeThreads, free_cores,
            "the training step uses " + Num(step_cores, "%.1f") + " of " + std::to_string(cores) +
                " cores while it runs, decoders busy " + Pct(e.decode_util),
            t, &out)) {
      cooldown_ = kCooldownWindows;
      return out;
    }
  }
  const TuneSettings before = now_;
  // 2. Reads bound: more reads in flight, toward the bandwidth-delay product.
  if (waits && e.read_util > 0.6 && e.read_ms >= kMinReadWaitMs && (!config_.has_decoders || e.decode_util < 0.7)) {
    const int io = now_[Knob::kIoDepth];
    const std::string reason = "reads wait " + Num(e.read_ms, e.read_ms < 10 ? "%.1f" : "%.0f") +
                               " ms each, readers busy " + Pct(e.read_util) + decode_note + ", " + wait_note;
    if (Set(Knob::kIoDepth, std::max(io + 2, io * 2), reason, t, &out)) {
      if (now_[Knob::kReadAhead] > 0) Set(Knob::kReadAhead, ReadAheadFor(now_[Knob::kIoDepth]), reason, t, &out);
      trial_ = Trial{before, e.rate(), Knob::kIoDepth};
      return out;
    }
  }
  // 3. Decode bound: one more decoder, up to the free cores.
  if (waits && config_.has_decoders && e.decode_util > 0.8 && now_[Knob::kDecodeThreads] < free_cores) {
    if (Set(Knob::kDecodeThreads, now_[Knob::kDecodeThreads] + 1,
            "decoders busy " + Pct(e.decode_util) + ", " + wait_note + ", " + std::to_string(free_cores) +
                " cores free of the step",
            t, &out)) {
      trial_ = Trial{before, e.rate(), Knob::kDecodeThreads};
      return out;
    }
  }
  // 4. Buffers short: neither stage saturated, the consumer waits, and the
  // scheduler waited for a batch buffer.
  if (waits && e.pool_wait_frac > 0.2 && e.read_util < 0.6 && (!config_.has_decoders || e.decode_util < 0.7)) {
    if (Set(Knob::kPrefetch, now_[Knob::kPrefetch] + 1,
            wait_note + " and batches waited " + Pct(e.pool_wait_frac) + " for a buffer while readers were busy " +
                Pct(e.read_util) + (config_.has_decoders ? " and decoders " + Pct(e.decode_util) : std::string()),
            t, &out)) {
      trial_ = Trial{before, e.rate(), Knob::kPrefetch};
      return out;
    }
  }
  return out;
}

}  // namespace stoker
