#include "core/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/huge_pages.h"

namespace stoker {

namespace {
constexpr size_t kAlignment = 4096;  // page-aligned: ready for pinning and O_DIRECT
// Buffers of at least one huge page are mapped on a 2 MiB boundary and asked
// to be backed by transparent huge pages (core/huge_pages.h says why).
// Pooled buffers are reused afterwards, so the first-touch cost is paid once
// per buffer either way.
size_t MappedBytes(size_t buffer_bytes) {
  const size_t bytes = (buffer_bytes + kAlignment - 1) / kAlignment * kAlignment;
  return bytes == 0 ? kAlignment : bytes;
}
}  // namespace

BufferPool::Lease::~Lease() { pool_->Release(data_); }

std::shared_ptr<BufferPool> BufferPool::Create(size_t buffer_bytes, size_t capacity,
                                               std::shared_ptr<PageLocker> locker) {
  return std::shared_ptr<BufferPool>(new BufferPool(buffer_bytes, capacity, std::move(locker)));
}

BufferPool::~BufferPool() {
  // Every lease holds the pool, so by now all buffers are back in free_.
  for (uint8_t* p : free_) Free(p);
}

uint8_t* BufferPool::Allocate() {
  const size_t bytes = MappedBytes(buffer_bytes_);
  if (bytes < kHugePage) {
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  return static_cast<uint8_t*>(MapHugePageAligned(bytes));
}

void BufferPool::Free(uint8_t* data) {  // REQUIRES mu_ (or the destructor)
  const size_t bytes = MappedBytes(buffer_bytes_);
  if (auto it = std::find(pinned_.begin(), pinned_.end(), data); it != pinned_.end()) {
    locker_->Unlock(data);
    pinned_.erase(it);
  }
  if (bytes < kHugePage) {
    std::free(data);
  } else {
    munmap(data, bytes);
  }
}

void BufferPool::GrantOverflow() {
  std::lock_guard lock(mu_);
  ++overflow_permits_;
  freed_.notify_all();
}

void BufferPool::RevokeOverflow() {
  std::lock_guard lock(mu_);
  overflow_permits_ = 0;
}

std::unique_ptr<BufferPool::Lease> BufferPool::Acquire() {
  std::unique_lock lock(mu_);
  freed_.wait(lock, [&] {
    return cancelled_ || overflow_permits_ > 0 || !free_.empty() || allocated_ < capacity_;
  });
  if (cancelled_) return nullptr;
  uint8_t* data;
  if (!free_.empty()) {
    data = free_.back();
    free_.pop_back();
    overflow_permits_ = 0;  // a pooled buffer came back: the grant is moot
  } else {
    const bool overflow = allocated_ >= capacity_;
    if (overflow) {
      ++overflow_;
      --overflow_permits_;
    }
    ++allocated_;
    lock.unlock();  // allocation (and first-touch, and page-locking) happens outside the lock
    data = Allocate();
    if (locker_ && !overflow && locker_->Lock(data, MappedBytes(buffer_bytes_))) {
      lock.lock();
      pinned_.push_back(data);
    }
  }
  return std::unique_ptr<Lease>(new Lease(shared_from_this(), data, buffer_bytes_));
}

void BufferPool::Release(uint8_t* data) {
  std::lock_guard lock(mu_);
  if (allocated_ > capacity_) {
    --allocated_;
    Free(data);
    return;
  }
  free_.push_back(data);
  freed_.notify_one();
}

void BufferPool::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  freed_.notify_all();
}

void BufferPool::Reset() {
  std::lock_guard lock(mu_);
  cancelled_ = false;
}

size_t BufferPool::free_count() const {
  std::lock_guard lock(mu_);
  return free_.size() + (capacity_ > allocated_ ? capacity_ - allocated_ : 0);
}

size_t BufferPool::pinned_count() const {
  std::lock_guard lock(mu_);
  return pinned_.size();
}

size_t BufferPool::overflow_allocations() const {
  std::lock_guard lock(mu_);
  return overflow_;
}

}  // namespace stoker
