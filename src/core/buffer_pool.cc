#include "core/buffer_pool.h"

#include <cstdlib>
#include <new>

namespace stoker {

namespace {
constexpr size_t kAlignment = 4096;  // page-aligned: ready for pinning and O_DIRECT
}

BufferPool::Lease::~Lease() { pool_->Release(data_); }

std::shared_ptr<BufferPool> BufferPool::Create(size_t buffer_bytes, size_t capacity) {
  return std::shared_ptr<BufferPool>(new BufferPool(buffer_bytes, capacity));
}

BufferPool::~BufferPool() {
  // Every lease holds the pool, so by now all buffers are back in free_.
  for (uint8_t* p : free_) std::free(p);
}

uint8_t* BufferPool::Allocate() {
  size_t bytes = (buffer_bytes_ + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

void BufferPool::GrantOverflow() {
  std::lock_guard lock(mu_);
  ++overflow_permits_;
  freed_.notify_all();
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
    if (allocated_ >= capacity_) {
      ++overflow_;
      --overflow_permits_;
    }
    ++allocated_;
    lock.unlock();  // allocation (and first-touch) happens outside the lock
    data = Allocate();
  }
  return std::unique_ptr<Lease>(new Lease(shared_from_this(), data, buffer_bytes_));
}

void BufferPool::Release(uint8_t* data) {
  std::lock_guard lock(mu_);
  if (allocated_ > capacity_) {
    --allocated_;
    std::free(data);
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

size_t BufferPool::overflow_allocations() const {
  std::lock_guard lock(mu_);
  return overflow_;
}

}  // namespace stoker
