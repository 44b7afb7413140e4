// io/mapped_reader.h — RandomAccessReader over a memory-mapped local file:
// reads are user-space copies out of the mapping (io/file_mapping.h).
//
// Why: from a hot page cache a pread is the kernel's copy_to_user plus a
// page-cache lookup per page, about half of memcpy's bandwidth here; a copy
// out of a mapping whose pages are already mapped is memcpy itself. The loader
// opens its local, uncompressed shards through it (OpenShardReader); remote
// objects, the local cache of remote objects and compressed shards keep their
// own readers. Mapped bytes count in the process's RSS (io/file_mapping.h),
// so the loader maps only within what its memory budget leaves
// (pipeline/shard_files.h).
//
// The contract stays pread's: a file shorter than a read asks for is DataLoss
// naming the file and offset. The size is checked before each read against
// the size at open, the copy is guarded (a page the file lost since it was
// mapped faults into an error, io/fault_guard.h), and after each read an
// fstat confirms the file still holds what was copied: a file truncated into
// the middle of a page leaves that page's tail mapped but reading zeros, which
// neither the fault nor the first check would see.
//
// STOKER_MMAP=0 in the environment turns mapping off (MapIfLocal then keeps
// the pread reader), checked at each open.
// Thread-safety: reads from many threads at once.
#pragma once

#include <memory>
#include <string>

#include "io/file_mapping.h"
#include "io/posix_reader.h"

namespace stoker {

class MappedReader : public RandomAccessReader {
 public:
  // Maps the file `*file` reads (keeping it open for the post-read fstat);
  // `keep` as FileMapping::Map's. On failure (mmap refused) *file stays.
  static Result<std::unique_ptr<MappedReader>> Wrap(std::unique_ptr<PosixReader>* file, bool keep = true);

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override;
  Status PReadDetoured(uint64_t offset, std::span<uint8_t> out, std::span<const Detour> detours) const override;
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return file_->Name(); }

 private:
  MappedReader(std::unique_ptr<PosixReader> file, std::shared_ptr<const FileMapping> mapping);
  // Copies [offset, offset + out.size()) of the mapping, which the caller has
  // checked lies inside size_; `streaming` for a batch slot (core/stream_copy.h).
  Status Copy(uint64_t offset, std::span<uint8_t> out, bool streaming = false) const;
  // After reading up to `end`: the file must still reach it.
  Status StillThere(uint64_t offset, uint64_t end) const;

  std::unique_ptr<PosixReader> file_;
  std::shared_ptr<const FileMapping> mapping_;
  uint64_t size_;
};

// False when STOKER_MMAP=0 is set now.
bool MappingEnabled();

// `reader` mapped when it reads a local uncompressed file (a PosixReader, as
// OpenReader opens one) and mapping is enabled; else, or when the mapping
// fails, `reader` itself. *mapped says which.
std::unique_ptr<RandomAccessReader> MapIfLocal(std::unique_ptr<RandomAccessReader> reader, bool keep, bool* mapped);

// OpenReader, then MapIfLocal (kept in the cache).
Result<std::unique_ptr<RandomAccessReader>> OpenShardReader(const std::string& url, const IoOptions& io = DefaultIoOptions());

}  // namespace stoker
