#include "core/buffer_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace stoker {

namespace {
constexpr size_t kAlignment = 4096;  // page-aligned: ready for pinning and O_DIRECT
// A buffer of at least a huge page is mapped on huge-page boundaries and
// advised MADV_HUGEPAGE (transparent huge pages in "madvise" mode, Debian's
// default, give them only to who asks). Its first touch is then one fault
// per 2 MiB instead of per 4 KiB: a fresh 19 MB batch buffer filled by
// memcpy took 14 ms with 4 KiB pages against 4 ms advised and 3 ms refilled,
// and a fresh loader fills prefetch + 1 of them in its first batches.
constexpr size_t kHugePage = 2u << 20;

size_t Rounded(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }
}  // namespace

void BufferPool::Free(uint8_t* p) const {
  if (buffer_bytes_ >= kHugePage) {
    ::munmap(p, Rounded(buffer_bytes_, kHugePage));
  } else {
    std::free(p);
  }
}

BufferPool::Lease::~Lease() { pool_->Release(data_); }

std::shared_ptr<BufferPool> BufferPool::Create(size_t buffer_bytes, size_t capacity) {
  return std::shared_ptr<BufferPool>(new BufferPool(buffer_bytes, capacity));
}

BufferPool::~BufferPool() {
  // Every lease holds the pool, so by now all buffers are back in free_.
  for (uint8_t* p : free_) Free(p);
}

uint8_t* BufferPool::Allocate() {
  if (buffer_bytes_ >= kHugePage) {
    // Map a huge page more than needed, keep the aligned part, give back the rest.
    const size_t bytes = Rounded(buffer_bytes_, kHugePage);
    void* raw = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = Rounded(begin, kHugePage);
    if (aligned > begin) ::munmap(raw, aligned - begin);
    if (begin + kHugePage > aligned) ::munmap(reinterpret_cast<void*>(aligned + bytes), begin + kHugePage - aligned);
    ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // a hint: 4 KiB pages if refused
    return reinterpret_cast<uint8_t*>(aligned);
  }
  size_t bytes = Rounded(buffer_bytes_, kAlignment);
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

size_t BufferPool::overflow_allocations() const {
  std::lock_guard lock(mu_);
  return overflow_;
}

}  // namespace stoker
