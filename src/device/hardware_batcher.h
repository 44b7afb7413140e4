// device/hardware_batcher.h — one thread that drives a device's hardware JPEG
// decoder, as DALI, nvImageCodec and torchvision drive nvJPEG's: one state,
// one batched call at a time, batches sized to the engines, and a watchdog so
// that a hardware batch that never returns costs one bounded wait, not the run.
//
//   decode thread: Decode(images) ──queue──▶ worker: combines the queued
//   images into one hardware batch (a multiple of `unit` = engines × cores,
//   at most max_batch; fewer than `unit` queued go as they are) ──▶ Run(batch)
//   ──▶ every request whose images it held is answered.
//
// The watchdog: a waiting decode thread checks the batch in progress against
// its bound, max(min_bound_s, bound_factor × its images × the measured
// seconds per image; first_bound_s for the first batch); past it, the hardware decoder is dead for the life of
// this object (the process, for nvJPEG's): every waiting request is answered
// at once (kAbandoned for those in the hung batch, kDead for the rest) and
// every later Decode returns kDead without queuing. The hung batch's outputs
// and input bytes stay the batch's: the hardware may still write them, so a
// caller never reuses them (it leaks them: at most one batch, once). The
// worker thread is left inside the hung call; it exits if the call returns.
// Said once on stderr, and by failure().
// Thread-safety: Decode, dead, failure from any thread. The destructor waits
// for a batch in progress: whoever makes Run hang must release it first.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// One image of a hardware batch: its compressed bytes, and where its
// interleaved RGB goes (device memory for nvJPEG, host memory for the stand-in).
struct HardwareImage {
  const uint8_t* bytes = nullptr;
  size_t length = 0;
  uint8_t* out = nullptr;
  size_t pitch = 0;
  int width = 0, height = 0;
};

struct HardwareBatcherOptions {
  std::string name = "hardware decoder";  // for the log line and failure()
  int unit = 1;                           // engines × cores: batches are multiples of it
  int max_batch = 64;
  double min_bound_s = 2.0;               // the watchdog never fires sooner
  double bound_factor = 50;               // × the batch's expected time
  double prior_s_per_image = 0.004;       // expected before any batch returned
  // The first batch's least bound: it may set the hardware up (nvJPEG's PreAllocate, the engines' first use).
  double first_bound_s = 10.0;
};

class HardwareBatcher {
 public:
  // Runs one hardware batch on the worker thread: Ok when every image's
  // pixels are at its out (a host wait included: nothing is in flight after).
  using Run = std::function<Status(std::span<const HardwareImage>)>;
  enum class Outcome {
    kDecoded,    // every image decoded
    kFailed,     // the hardware failed a batch holding some (error set); outputs free to reuse
    kDead,       // the decoder is dead; none of these images is in a hung batch, outputs free to reuse
    kAbandoned,  // in the batch the watchdog gave up on: outputs and bytes are that batch's for good
  };

  HardwareBatcher(Run run, HardwareBatcherOptions options);
  ~HardwareBatcher();
  HardwareBatcher(const HardwareBatcher&) = delete;
  HardwareBatcher& operator=(const HardwareBatcher&) = delete;

  Outcome Decode(std::span<const HardwareImage> images, Status* error);
  bool dead() const { return dead_flag_.load(std::memory_order_acquire); }
  // "" while alive; else what happened, for report() and settings.
  std::string failure() const;
  // Hardware batches run so far, and their images (for tests and the log).
  uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // Images queued, not yet given to a batch (for tests).
  size_t queued_images() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Request {
    std::vector<HardwareImage> images;
    size_t next = 0;  // images given to a batch so far
    size_t done = 0;  // images whose batch returned
    bool failed = false, dead = false, abandoned = false;
    Status error;
  };
  void Work();
  void MarkDead();  // REQUIRES mu_

  const Run run_;
  const HardwareBatcherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker: something queued, or stop
  std::condition_variable done_cv_;  // requesters: a batch began or returned, or the decoder died
  std::deque<std::shared_ptr<Request>> queue_;      // guarded by mu_
  std::vector<std::shared_ptr<Request>> running_;   // guarded by mu_: the requests in the batch in progress
  bool busy_ = false;                               // guarded by mu_: a batch is in progress
  size_t busy_images_ = 0;                          // guarded by mu_
  Clock::time_point busy_since_{};                  // guarded by mu_
  double bound_s_ = 0;                              // guarded by mu_: the batch in progress's bound
  double s_per_image_;                              // guarded by mu_; smoothed over returned batches
  bool returned_any_ = false;                       // guarded by mu_
  bool stop_ = false;                               // guarded by mu_
  bool dead_ = false;                               // guarded by mu_
  std::string failure_;                             // guarded by mu_
  std::atomic<bool> dead_flag_{false};
  std::atomic<uint64_t> batches_{0};
  std::thread worker_;  // last: starts once everything above is set
};

}  // namespace stoker
