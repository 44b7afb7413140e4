// core/ordered_queue.h — a blocking queue of fixed capacity with cancellation
// that hands out its least item first, and admits waiting producers least
// item first.
//
// Why not FIFO: the decode queue is fed by several readers, each finishing
// its read when it finishes. With a FIFO, a read of the batch due next that
// ended a little late waited behind reads of later batches: a reader blocked
// on the full queue lost the freed place to a reader of batch 1 that came by
// just then, and its sample was decoded after batch 1's. Measured on S (8
// JPEGs of 1500x1000 per batch, 2 decoders): batch 0's last sample was
// decoded after four of batch 1's, and the first batch took 82-88 ms where
// its decodes alone take about 60. Ordered, the batch due next is always
// decoded first: from read order to decode order, the plan's order holds.
// The capacity still bounds the queue: a producer only waits longer.
// Cancel wakes every waiter so shutdown never hangs; after it, Push drops its
// item and returns false and Pop returns nullopt. Optional counters receive
// the nanoseconds producers waited for room and consumers for items.
// Thread-safety: all members are safe from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "core/timed_wait.h"

namespace stoker {

// Less(a, b): a is due before b.
template <typename T, typename Less>
class OrderedQueue {
 public:
  explicit OrderedQueue(size_t capacity, std::atomic<uint64_t>* put_wait_ns = nullptr,
                        std::atomic<uint64_t>* get_wait_ns = nullptr)
      : capacity_(capacity == 0 ? 1 : capacity), put_wait_ns_(put_wait_ns), get_wait_ns_(get_wait_ns) {}

  bool Push(T item) {
    std::unique_lock lock(mu_);
    auto me = waiting_.insert(&item);
    // Room, and no waiting producer holds an item due before this one.
    TimedWait(not_full_, lock, put_wait_ns_,
         [&] { return cancelled_ || (items_.size() < capacity_ && !Less()(**waiting_.begin(), item)); });
    waiting_.erase(me);
    if (cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    if (!waiting_.empty() && items_.size() < capacity_) not_full_.notify_all();  // the next least may enter
    return true;
  }

  std::optional<T> Pop() {
    std::unique_lock lock(mu_);
    TimedWait(not_empty_, lock, get_wait_ns_, [&] { return cancelled_ || !items_.empty(); });
    if (cancelled_) return std::nullopt;
    auto least = std::min_element(items_.begin(), items_.end(), Less());
    T item = std::move(*least);
    items_.erase(least);
    // Every waiter: only the one holding the least item may take the place.
    if (!waiting_.empty()) not_full_.notify_all();
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
  // Producers blocked in Push.
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
  }

 private:
  struct LessPtr {
    bool operator()(const T* a, const T* b) const { return Less()(*a, *b); }
  };

  const size_t capacity_;
  std::atomic<uint64_t>* const put_wait_ns_;
  std::atomic<uint64_t>* const get_wait_ns_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::vector<T> items_;                          // guarded by mu_; at most capacity_, unordered
  std::multiset<const T*, LessPtr> waiting_;      // guarded by mu_; the items of producers in Push
  bool cancelled_ = false;                        // guarded by mu_
};

}  // namespace stoker
