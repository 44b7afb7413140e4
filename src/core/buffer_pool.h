// core/buffer_pool.h — fixed-size, page-aligned buffers recycled across batches.
//
// The pool is sized at start (`capacity` buffers of `buffer_bytes`), so the
// loader's memory does not grow with epochs or dataset size. A buffer leaves
// the pool as a Lease and comes back when the lease is released — in stoker,
// when the last Python reference to a batch dies.
//
// One escape hatch keeps a loop from deadlocking when the caller itself holds
// every buffer (e.g. `list(loader)`): GrantOverflow() lets one blocked Acquire
// allocate a buffer beyond capacity; it is freed, not pooled, on release, and
// counted, so the loader's own memory stays bounded.
//
// With a PageLocker (device/copy_engine.h's PinHost: cudaHostRegister), the
// pool's own buffers are page-locked once, when first allocated, and
// unlocked when freed, so a device copy out of them is a true asynchronous
// DMA. Overflow buffers are left pageable: they are short-lived, and locking
// costs more than it saves on a buffer used once.
// Thread-safety: all members are safe from any thread. Leases may outlive the
// pool's owner: they hold the pool by shared_ptr.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace stoker {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Returns buffers to their pool on destruction.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

   private:
    friend class BufferPool;
    Lease(std::shared_ptr<BufferPool> pool, uint8_t* data, size_t size)
        : pool_(std::move(pool)), data_(data), size_(size) {}
    std::shared_ptr<BufferPool> pool_;
    uint8_t* data_;
    size_t size_;
  };

  // Page-locks buffers for device copies; Lock returns false where refused.
  class PageLocker {
   public:
    virtual ~PageLocker() = default;
    virtual bool Lock(void* p, size_t bytes) = 0;
    virtual void Unlock(void* p) = 0;
  };

  static std::shared_ptr<BufferPool> Create(size_t buffer_bytes, size_t capacity,
                                            std::shared_ptr<PageLocker> locker = nullptr);
  ~BufferPool();

  // Blocks until a buffer is free, an overflow is granted, or Cancel();
  // nullptr when cancelled.
  std::unique_ptr<Lease> Acquire();
  void GrantOverflow();
  // Withdraws a grant no Acquire used: one made for an Acquire that had
  // meanwhile got a pooled buffer must not let a later one pass capacity.
  void RevokeOverflow();
  // Wakes every Acquire; later Acquires return nullptr until Reset().
  void Cancel();
  void Reset();

  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t capacity() const { return capacity_; }
  size_t free_count() const;
  size_t overflow_allocations() const;  // lifetime count of buffers made past capacity
  size_t pinned_count() const;          // buffers page-locked now

 private:
  BufferPool(size_t buffer_bytes, size_t capacity, std::shared_ptr<PageLocker> locker)
      : buffer_bytes_(buffer_bytes), capacity_(capacity), locker_(std::move(locker)) {}
  void Release(uint8_t* data);
  // Page-aligned; from 2 MiB on, mapped on a huge-page boundary (see .cc).
  uint8_t* Allocate();
  void Free(uint8_t* data);

  const size_t buffer_bytes_;
  const size_t capacity_;
  const std::shared_ptr<PageLocker> locker_;  // may be null
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<uint8_t*> free_;   // guarded by mu_
  size_t allocated_ = 0;         // guarded by mu_: buffers in existence
  size_t overflow_ = 0;          // guarded by mu_
  size_t overflow_permits_ = 0;  // guarded by mu_
  bool cancelled_ = false;       // guarded by mu_
  std::vector<uint8_t*> pinned_;  // guarded by mu_: buffers locker_ locked
};

}  // namespace stoker
