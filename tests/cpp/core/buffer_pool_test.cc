#include "core/buffer_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(BufferPoolTest, RecyclesWithinCapacityAndLendsOverflowOnlyWhenGranted) {
  auto pool = BufferPool::Create(1000, 2);
  auto a = pool->Acquire();
  auto b = pool->Acquire();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 4096, 0u);  // page-aligned
  EXPECT_EQ(pool->free_count(), 0u);

  uint8_t* first = a->data();
  a.reset();  // back to the pool, not freed
  EXPECT_EQ(pool->free_count(), 1u);
  auto c = pool->Acquire();
  EXPECT_EQ(c->data(), first);

  // Every buffer is out: a grant lets one Acquire allocate past capacity.
  pool->GrantOverflow();
  auto extra = pool->Acquire();
  ASSERT_TRUE(extra);
  EXPECT_EQ(pool->overflow_allocations(), 1u);
  extra.reset();  // freed, not pooled: the pool stays at its capacity
  EXPECT_EQ(pool->free_count(), 0u);
  b.reset();
  c.reset();
  EXPECT_EQ(pool->free_count(), 2u);
}

TEST(BufferPoolTest, ARevokedGrantLetsNoLaterAcquirePassCapacity) {
  auto pool = BufferPool::Create(64, 1);
  auto held = pool->Acquire();
  pool->GrantOverflow();  // made for an Acquire that got a pooled buffer meanwhile
  pool->RevokeOverflow();
  std::unique_ptr<BufferPool::Lease> got;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    got = pool->Acquire();  // must wait for `held`, not allocate
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned);
  uint8_t* data = held->data();
  held.reset();
  waiter.join();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->data(), data);
  EXPECT_EQ(pool->overflow_allocations(), 0u);
}

TEST(BufferPoolTest, CancelWakesABlockedAcquire) {
  auto pool = BufferPool::Create(64, 1);
  auto held = pool->Acquire();
  std::unique_ptr<BufferPool::Lease> got;
  bool returned = false;
  std::thread waiter([&] {
    got = pool->Acquire();  // blocks: the only buffer is held
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pool->Cancel();
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(got, nullptr);
  pool->Reset();
  held.reset();
  EXPECT_NE(pool->Acquire(), nullptr);
}

}  // namespace
TEST(BufferPoolTest, LargeBuffersStartOnAHugePageAndAreWholeAndRecycled) {
  // 64 x 224x224x3, a V batch: mapped on a 2 MiB boundary (buffer_pool.cc).
  const size_t bytes = 64 * 224 * 224 * 3;
  auto pool = BufferPool::Create(bytes, 2);
  auto a = pool->Acquire();
  auto b = pool->Acquire();
  ASSERT_TRUE(a && b);
  for (const auto* l : {a.get(), b.get()}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l->data()) % (2u << 20), 0u);
    std::memset(l->data(), 0xab, bytes);  // every byte is mapped and writable
    EXPECT_EQ(l->data()[bytes - 1], 0xab);
  }
  uint8_t* first = a->data();
  a.reset();
  auto c = pool->Acquire();
  EXPECT_EQ(c->data(), first);  // recycled, not mapped again
  pool->GrantOverflow();
  auto d = pool->Acquire();  // past capacity: unmapped on release
  ASSERT_TRUE(d);
  std::memset(d->data(), 1, bytes);
  d.reset();
  EXPECT_EQ(pool->overflow_allocations(), 1u);
  // Small buffers stay on the heap, page-aligned.
  auto small = BufferPool::Create(1000, 1);
  auto s = small->Acquire();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % 4096, 0u);
}

// Records what the pool asked to page-lock (as cudaHostRegister would be asked).
class RecordingLocker : public BufferPool::PageLocker {
 public:
  bool Lock(void* p, size_t bytes) override {
    locked.push_back(p);
    EXPECT_EQ(bytes % 4096, 0u);
    return true;
  }
  void Unlock(void* p) override {
    auto it = std::find(locked.begin(), locked.end(), p);
    ASSERT_NE(it, locked.end()) << "unlocked a buffer never locked";
    locked.erase(it);
  }
  std::vector<void*> locked;
};

TEST(BufferPoolTest, PinsItsOwnBuffersOnceAndUnpinsThemWhenFreed) {
  auto locker = std::make_shared<RecordingLocker>();
  {
    auto pool = BufferPool::Create(5000, 2, locker);
    auto a = pool->Acquire();
    auto b = pool->Acquire();
    EXPECT_EQ(pool->pinned_count(), 2u);
    a.reset();
    auto again = pool->Acquire();  // recycled: not locked twice
    EXPECT_EQ(locker->locked.size(), 2u);
    pool->GrantOverflow();
    auto extra = pool->Acquire();  // overflow: short-lived, left pageable
    EXPECT_EQ(locker->locked.size(), 2u);
    extra.reset();  // one buffer past capacity is freed; if it was a pinned one, it is unpinned first
    EXPECT_EQ(pool->pinned_count(), locker->locked.size());
  }
  EXPECT_TRUE(locker->locked.empty()) << "a pinned buffer was freed without being unpinned";
}

}  // namespace stoker
