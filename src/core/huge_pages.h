// core/huge_pages.h — anonymous memory mapped on a 2 MiB boundary and asked
// to be backed by transparent huge pages, for buffers that live long and are
// written whole: pooled batches (core/buffer_pool.h) and each decoder's
// scratch (codecs/decode_scratch.h, through PageAllocator<T, true>).
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

}  // namespace stoker
