// io/cancel.h — telling remote reads that nobody wants their bytes any more.
//
// A loader drops work it prepared (an epoch read ahead, a run replaced by
// set_epoch or a restore, a close) by destroying the run whose threads do the
// reads. Local reads end by themselves in microseconds; a remote read may sit
// in a retry back-off for seconds, or wait on a stalled server up to its
// request deadline. A Cancellation ends both: the run's threads install it
// for themselves (CancelScope), and the HTTP client (io/http_reader.cc)
// obeys the one installed on the calling thread: a back-off wait wakes at
// once, no further attempt is sent, and a transfer on the wire is aborted at
// libcurl's next progress callback (at most about a second later, at once
// while bytes flow). The read then fails with kCancelled.
//
// The cancellation travels with the thread rather than through
// RandomAccessReader's signature, so the readers between the pipeline and
// HTTP (gzip, zstd, the cache's fetch) pass it on without knowing of it.
// Thread-safety: Cancel, cancelled and SleepFor from any thread; a
// CancelScope belongs to the thread that made it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace stoker {

class Cancellation {
 public:
  // Every SleepFor wakes and returns false; later ones return false at once.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Waits `d`, or less once cancelled; true when the whole wait passed.
  bool SleepFor(std::chrono::milliseconds d);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;                // pairs with cv_; cancelled_ is set under it
  std::condition_variable cv_;
};

// The calling thread's reads obey `c` (null: none) while the scope lives.
class CancelScope {
 public:
  explicit CancelScope(Cancellation* c);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  Cancellation* previous_;
};

// The cancellation installed on the calling thread, or null.
Cancellation* CurrentCancellation();

}  // namespace stoker
