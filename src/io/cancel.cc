// io/cancel.cc — see cancel.h.
#include "io/cancel.h"

namespace stoker {

namespace {
thread_local Cancellation* current = nullptr;
}  // namespace

void Cancellation::Cancel() {
  {
    // Set under the lock so that a SleepFor between its test and its wait
    // cannot miss the wake-up.
    std::lock_guard lock(mu_);
    cancelled_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool Cancellation::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return cancelled_.load(std::memory_order_acquire); });
}

CancelScope::CancelScope(Cancellation* c) : previous_(current) { current = c; }
CancelScope::~CancelScope() { current = previous_; }

Cancellation* CurrentCancellation() { return current; }

}  // namespace stoker
