// core/timed_wait.h — a condition-variable wait that adds the time it
// blocked to a counter: the queues' put and get waits (bounded_queue.h,
// ordered_queue.h), which tell which side of a queue is the slower stage.
// Thread-safety: as std::condition_variable::wait; the counter is atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace stoker {

// Waits on `cv` for `ready`, adding the nanoseconds waited to `sink` (if
// any) only when it actually blocks.
template <typename Pred>
void TimedWait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, std::atomic<uint64_t>* sink,
               Pred ready) {
  if (ready()) return;
  auto begin = std::chrono::steady_clock::now();
  cv.wait(lock, ready);
  if (sink) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin);
    sink->fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
  }
}

}  // namespace stoker
