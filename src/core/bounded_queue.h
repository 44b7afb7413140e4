// core/bounded_queue.h — a blocking FIFO of fixed capacity with cancellation.
//
// Every queue on the data path is one of these: Push blocks while full, Pop
// while empty, and Cancel wakes every waiter so shutdown never hangs. After
// Cancel, Push drops its item and returns false; Pop returns nullopt.
// Thread-safety: all members are safe from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace stoker {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  bool Push(T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return cancelled_ || items_.size() < capacity_; });
    if (cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> Pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return cancelled_ || !items_.empty(); });
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
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;   // guarded by mu_
  bool cancelled_ = false;  // guarded by mu_
};

}  // namespace stoker
