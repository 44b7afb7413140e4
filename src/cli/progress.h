// cli/progress.h — progress report on stderr for long commands (pack, synth).
//
// On a terminal: one line rewritten in place, at most ten times a second:
// items, bytes, MB/s and ETA. Otherwise (a log file, CI): a plain line every
// five seconds, so logs stay readable. Quiet: nothing.
// Thread-safety: Add may be called from any thread (one mutex; called per
// file, far from any hot loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace stoker::cli {

class Progress {
 public:
  // total_bytes 0: unknown, the ETA then follows the item count.
  Progress(std::string label, uint64_t total_items, uint64_t total_bytes, bool quiet);
  ~Progress() { Finish(); }
  void Add(uint64_t items, uint64_t bytes);
  void Finish();  // final line (terminal: ends the rewritten line)

 private:
  using Clock = std::chrono::steady_clock;
  void Print(bool final);  // requires mu_

  const std::string label_;
  const uint64_t total_items_, total_bytes_;
  const bool quiet_, tty_;
  const Clock::time_point start_ = Clock::now();
  std::mutex mu_;  // guards everything below
  uint64_t items_ = 0, bytes_ = 0;
  Clock::time_point last_print_ = start_;
  bool finished_ = false;
};

}  // namespace stoker::cli
