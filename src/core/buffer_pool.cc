#include "core/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace stoker {

namespace {
constexpr size_t kAlignment = 4096;  // page-aligned: ready for pinning and O_DIRECT
// Buffers of at least this size are mapped on a 2 MiB boundary and asked to be
// backed by transparent huge pages (MADV_HUGEPAGE; honoured where THP is
// "madvise" or "always"). Why: every loader's first batches are written into
// fresh buffers, and a 9.6 MB batch (64 x 224x224x3) touched 4 KiB at a time
// takes 2,352 page faults, 5-14 ms on the 2-core VM the benchmarks run on,
// against 1.4-1.7 ms in 2 MiB pages (measured side by side, mmap + one write
// per page). That cost lands on the decoders of the first batch, i.e. on the
// time to first batch. Pooled buffers are reused afterwards, so it is paid
// once per buffer either way.
constexpr size_t kHugePage = size_t{2} << 20;

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
  // One huge page more than needed, then the unaligned head and the tail
  // beyond it unmapped: a mapping that starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (start > begin) munmap(raw, start - begin);
  const uintptr_t end = begin + bytes + kHugePage;
  if (end > start + bytes) munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  (void)madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
  return reinterpret_cast<uint8_t*>(start);
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
