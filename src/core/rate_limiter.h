// core/rate_limiter.h — a token bucket for bytes per second.
//
// Readers take tokens for each read, so a loader can be told to stay under a
// bandwidth (shared storage, noisy neighbours) — and tests can make storage
// slow on purpose to check the diagnosis. A waiting Acquire returns early,
// with false, once Cancel() is called, so shutdown never waits on the bucket.
// Thread-safety: all members are safe from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace stoker {

class RateLimiter {
 public:
  // bytes_per_second == 0 means unlimited. The burst is a tenth of a second.
  explicit RateLimiter(uint64_t bytes_per_second)
      : rate_(static_cast<double>(bytes_per_second)), burst_(rate_ / 10), tokens_(burst_),
        last_(std::chrono::steady_clock::now()) {}

  bool Acquire(uint64_t bytes) {
    if (rate_ <= 0) return true;
    std::unique_lock lock(mu_);
    // Debt is allowed (tokens may go negative) so reads larger than the burst
    // pass; the next caller waits the debt off.
    while (true) {
      if (cancelled_) return false;
      Refill();
      if (tokens_ >= 0) {
        tokens_ -= static_cast<double>(bytes);
        return true;
      }
      auto wait = std::chrono::duration<double>(-tokens_ / rate_);
      cancel_cv_.wait_for(lock, std::chrono::duration_cast<std::chrono::nanoseconds>(wait));
    }
  }

  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cancel_cv_.notify_all();
  }

 private:
  void Refill() {
    auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

  const double rate_;
  const double burst_;
  std::mutex mu_;
  std::condition_variable cancel_cv_;
  double tokens_;                                 // guarded by mu_
  std::chrono::steady_clock::time_point last_;    // guarded by mu_
  bool cancelled_ = false;                        // guarded by mu_
};

}  // namespace stoker
