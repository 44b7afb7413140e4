// core/file.h — RAII for a file descriptor and positional reads/writes that
// report the path and offset on failure. Thread-safety: PRead is safe from many
// threads at once (pread has no shared file position).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "stoker/status.h"

namespace stoker {

class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  static Result<File> OpenRead(const std::string& path);
  static Result<File> OpenWrite(const std::string& path);  // create/truncate

  // Reads exactly out.size() bytes at offset; a short read is DataLoss (the
  // file ends early) naming path, offset and how many bytes were there.
  Status PRead(uint64_t offset, std::span<uint8_t> out) const;
  // Reads up to out.size() bytes; returns the count (0 at end of file).
  Result<size_t> PReadSome(uint64_t offset, std::span<uint8_t> out) const;
  Status Write(std::span<const uint8_t> data);
  Status Close();
  Result<uint64_t> Size() const;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

Result<std::string> ReadWholeFile(const std::string& path);
Status WriteWholeFile(const std::string& path, std::span<const uint8_t> data);

}  // namespace stoker
