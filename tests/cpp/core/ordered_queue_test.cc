#include "core/ordered_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace stoker {
namespace {

using Queue = OrderedQueue<int, std::less<int>>;

// Waits until the queue holds `size` items and `waiting` producers are blocked.
void AwaitState(const Queue& q, size_t size, size_t waiting) {
  while (q.size() != size || q.waiting() != waiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(OrderedQueueTest, PopsTheLeastQueuedItemFirst) {
  Queue q(4);
  for (int v : {7, 3, 9, 1}) ASSERT_TRUE(q.Push(v));
  std::vector<int> got;
  for (int i = 0; i < 4; ++i) got.push_back(*q.Pop());
  EXPECT_EQ(got, (std::vector<int>{1, 3, 7, 9}));
}

TEST(OrderedQueueTest, AFreedPlaceGoesToTheWaitingProducerWithTheLeastItem) {
  // The decode queue's case: full of later batches' samples, a reader of the
  // batch due next waits beside a reader of a later one; the freed place is
  // the earlier reader's, whichever asked first.
  Queue q(2);
  ASSERT_TRUE(q.Push(10));
  ASSERT_TRUE(q.Push(11));
  std::thread late([&] { q.Push(12); });
  AwaitState(q, 2, 1);
  std::thread early([&] { q.Push(5); });
  AwaitState(q, 2, 2);
  EXPECT_EQ(*q.Pop(), 10);  // frees one place: 5 takes it, 12 still waits
  AwaitState(q, 2, 1);
  EXPECT_EQ(*q.Pop(), 5);
  EXPECT_EQ(*q.Pop(), 11);
  EXPECT_EQ(*q.Pop(), 12);
  late.join();
  early.join();
}

TEST(OrderedQueueTest, NeverHoldsMoreThanItsCapacity) {
  Queue q(3);
  std::atomic<int> max_size{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 500; ++i) {
        q.Push(i * 4 + p);
        int s = static_cast<int>(q.size());
        for (int m = max_size.load(); s > m && !max_size.compare_exchange_weak(m, s);) {
        }
      }
    });
  }
  std::vector<int> got;
  for (int i = 0; i < 2000; ++i) got.push_back(*q.Pop());
  for (auto& t : producers) t.join();
  EXPECT_LE(max_size.load(), 3);
  std::sort(got.begin(), got.end());
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(got[i], i);  // every item once
}

TEST(OrderedQueueTest, CancelWakesBlockedProducersAndConsumers) {
  Queue full(1);
  ASSERT_TRUE(full.Push(1));
  Queue empty(1);
  bool pushed = true;
  std::optional<int> popped = 0;
  std::thread producer([&] { pushed = full.Push(2); });
  std::thread consumer([&] { popped = empty.Pop(); });
  AwaitState(full, 1, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer's Pop blocks or not: both end
  full.Cancel();
  empty.Cancel();
  producer.join();
  consumer.join();
  EXPECT_FALSE(pushed);
  EXPECT_FALSE(popped.has_value());
}

}  // namespace
}  // namespace stoker
