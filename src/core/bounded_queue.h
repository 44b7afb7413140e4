// core/bounded_queue.h — a blocking FIFO of fixed capacity with cancellation.
//
// Every queue on the data path is one of these: Push blocks while full, Pop
// while empty, and Cancel wakes every waiter so shutdown never hangs. After
// Cancel, Push drops its item and returns false; Pop returns nullopt.
// Optional counters receive the nanoseconds producers waited for room and
// consumers waited for items: which side waits tells which stage is slower.
// Thread-safety: all members are safe from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

#include "core/timed_wait.h"

namespace stoker {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity, std::atomic<uint64_t>* put_wait_ns = nullptr,
                        std::atomic<uint64_t>* get_wait_ns = nullptr)
      : capacity_(capacity == 0 ? 1 : capacity), put_wait_ns_(put_wait_ns), get_wait_ns_(get_wait_ns) {}

  bool Push(T item) {
    std::unique_lock lock(mu_);
    TimedWait(not_full_, lock, put_wait_ns_, [&] { return cancelled_ || items_.size() < capacity_; });
    if (cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> Pop() {
    std::unique_lock lock(mu_);
    TimedWait(not_empty_, lock, get_wait_ns_, [&] { return cancelled_ || !items_.empty(); });
    if (cancelled_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::atomic<uint64_t>* const put_wait_ns_;
  std::atomic<uint64_t>* const get_wait_ns_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;   // guarded by mu_
  bool cancelled_ = false;  // guarded by mu_
};

}  // namespace stoker
