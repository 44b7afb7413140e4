// core/huge_pages.h — anonymous memory mapped on a 2 MiB boundary and asked
// to be backed by transparent huge pages, for buffers that live long and are
// written whole: pooled batches (core/buffer_pool.h) and each decoder's
// scratch (codecs/decode_scratch.h).
//
// Why: such a buffer is first written by the first batch, and on the VMs the
// benchmarks run on a 4 KiB page fault costs about 3 us: a 9.6 MB batch takes
// 2,352 faults, 5-14 ms, against 1.4-1.7 ms in 2 MiB pages (measured side by
// side, mmap + one write per page), and a decoder's 3-6 MB of JPEG planes
// another 1,000-1,500. That cost lands on the decoders of the first batch,
// i.e. on the time to first batch. MADV_HUGEPAGE is a hint, honoured where
// THP is "madvise" or "always"; elsewhere the pages are 4 KiB as before.
// Thread-safety: stateless.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace stoker {

inline constexpr size_t kHugePage = size_t{2} << 20;

// `bytes` (a multiple of 4 KiB) of zeroed memory starting on a 2 MiB
// boundary: one huge page more is mapped, then the unaligned head and the
// tail beyond it are unmapped. Freed with munmap(p, bytes).
inline void* MapHugePageAligned(size_t bytes) {
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (start > begin) munmap(raw, start - begin);
  const uintptr_t end = begin + bytes + kHugePage;
  if (end > start + bytes) munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  (void)madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
  return reinterpret_cast<void*>(start);
}

// A decoder's scratch bytes: blocks of at least one huge page come from
// MapHugePageAligned, smaller ones from operator new; elements are
// default-initialised, since every scratch byte a decoder reads it wrote
// first (a value-initialised resize would write each new page twice, and
// fault it in from a memset).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding is implicit by design

  static size_t Mapped(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(MapHugePageAligned(Mapped(bytes)));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) {
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
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace stoker
