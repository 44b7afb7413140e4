// io/posix_reader.h — RandomAccessReader over a local file (core/File, pread).
// It owns its File, or borrows one the caller keeps open (Borrow).
// Thread-safety: ReadAt from many threads at once (pread).
#pragma once

#include "core/file.h"
#include "io/reader.h"

namespace stoker {

class PosixReader : public RandomAccessReader {
 public:
  static Result<std::unique_ptr<PosixReader>> Open(const std::string& path);
  // Over a File already open (its size known): no second open by path.
  static std::unique_ptr<PosixReader> Adopt(File file, uint64_t size);
  // A view of a File that must outlive the reader.
  PosixReader(const File* file, uint64_t size) : file_(file), size_(size) {}

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override;
  Status PReadDetoured(uint64_t offset, std::span<uint8_t> out, std::span<const Detour> detours) const override;
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return file_->path(); }
  const File& file() const { return *file_; }

 private:
  PosixReader(File owned, uint64_t size);
  File owned_;
  const File* file_;
  uint64_t size_;
};

}  // namespace stoker
