// core/page_allocator.h — an allocator that maps large blocks straight from
// the kernel (mmap/munmap) and leaves small ones to operator new.
//
// Why: glibc raises its mmap threshold to the size of the largest block freed,
// after which multi-MiB read buffers come from per-thread arenas and are not
// given back when freed; each epoch's threads then leave their buffers behind
// and RSS creeps epoch after epoch. Blocks of at least kPageAllocatorMmapFrom
// bytes bypass malloc: freeing one returns it to the kernel at once.
// Elements are default-initialised (resize writes nothing): a read buffer's
// bytes are all written by the read, except the ranges a detoured read sends
// straight to their batch slots, which nobody reads and which so stay
// untouched pages instead of megabytes zeroed per buffer (that zeroing made
// RSS depend on how many buffers timing happened to need at once).
// kHugePages (a decoder's scratch, codecs/decode_scratch.h): blocks of at
// least one huge page are mapped 2 MiB-aligned with MADV_HUGEPAGE instead
// (core/huge_pages.h says why), smaller ones come from operator new.
// Thread-safety: stateless.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <utility>

#include "core/huge_pages.h"

namespace stoker {

inline constexpr size_t kPageAllocatorMmapFrom = size_t{256} << 10;

template <typename T, bool kHugePages = false>
struct PageAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = PageAllocator<U, kHugePages>;
  };
  PageAllocator() = default;
  template <typename U>
  PageAllocator(const PageAllocator<U, kHugePages>&) {}  // NOLINT: rebinding is implicit by design

  static constexpr size_t kMapFrom = kHugePages ? kHugePage : kPageAllocatorMmapFrom;
  static size_t Mapped(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMapFrom) return static_cast<T*>(::operator new(bytes));
    if constexpr (kHugePages) return static_cast<T*>(MapHugePageAligned(Mapped(bytes)));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMapFrom) {
      ::operator delete(p);
    } else {
      munmap(p, Mapped(bytes));
    }
  }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-init: no write for bytes
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const PageAllocator<U, kHugePages>&) const { return true; }
};

}  // namespace stoker
