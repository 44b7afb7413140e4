// formats/tar.h — tar archives as WebDataset shards use them.
//
// Reading walks the 512-byte headers with pread and skips member data, so an
// index of a 1 GB shard costs one small read per member. Understood: POSIX
// ustar (with the 155-byte prefix), GNU long names ('L') and long links ('K'),
// pax extended headers ('x': path, size; 'g' is ignored), base-256 sizes.
// Only regular files are returned; directories, links and others are skipped.
// Errors name the file and the byte offset of the header at fault.
// Thread-safety: free functions; TarWriter is single-threaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/file.h"
#include "io/reader.h"
#include "stoker/status.h"

namespace stoker {

struct TarMember {
  std::string name;        // full path inside the archive
  uint64_t header_offset;  // first header byte (the pax/GNU header if there is one)
  uint64_t data_offset;    // first data byte
  uint64_t size;           // data size in bytes
};

// Lists the regular-file members of the tar at `path` (a local path or a
// remote URL: io/reader.h). A truncated archive
// (a header or member data past the end of file) is DataLoss naming the offset.
Result<std::vector<TarMember>> ScanTar(const std::string& path, const IoOptions& io = DefaultIoOptions());

// Same, over an open file of known size (messages name file.path()).
Result<std::vector<TarMember>> ScanTar(const File& file, uint64_t file_size);
// Same, over any reader (messages name reader.Name()); reads
// PreferredReadSize() bytes at a time, so a remote scan streams the shard.
Result<std::vector<TarMember>> ScanTar(const RandomAccessReader& reader, uint64_t file_size);

// Reads a tar front to back once, as a stream (webdataset's way): ScanTar's
// header walk over a forward window: a remote reader's PreferredReadSize (at
// least kStreamWindow), so a remote shard is a few large ranged GETs; a local
// file's kLocalStreamWindow (a pread costs no round trip, and a stream holds
// its window, the one before and the next shard's). Over a remote reader the
// next read runs ahead on a thread while the window is parsed.
// `small_start` (a stream's first shard): the window starts at
// kStreamWindow and doubles with each read, so the first member costs one
// small GET. Errors are ScanTar's (file, member, offset).
// Single-threaded (besides its read ahead); the reader outlives it.
class TarStream {
 public:
  static constexpr size_t kStreamWindow = 1 << 20;
  static constexpr size_t kLocalStreamWindow = 64 << 10;
  TarStream(const RandomAccessReader& file, uint64_t file_size, bool small_start = false);
  // The window a stream over `file` grows to (a memory estimate's unit).
  static size_t WindowBytes(const RandomAccessReader& file) {
    return file.remote() ? std::max<size_t>(kStreamWindow, file.PreferredReadSize()) : kLocalStreamWindow;
  }
  ~TarStream();
  TarStream(const TarStream&) = delete;
  TarStream& operator=(const TarStream&) = delete;
  // The next regular-file member; nullopt at the end of the archive.
  Result<std::optional<TarMember>> Next();
  // Appends the archive's bytes [from, to) to out: from the window where it
  // still holds them (the member just returned), else read again.
  Status Append(uint64_t from, uint64_t to, std::vector<uint8_t>* out);

 private:
  class Window;
  const RandomAccessReader& file_;
  uint64_t file_size_;
  uint64_t off_ = 0;
  std::unique_ptr<Window> window_;
};

// Writes a tar that GNU tar, Python's tarfile and webdataset read: ustar
// headers, a pax header for names over 100 bytes, two zero blocks at the end.
class TarWriter {
 public:
  static Result<TarWriter> Create(const std::string& path);
  Status Add(const std::string& name, std::span<const uint8_t> data);
  Status Close();
  uint64_t bytes_written() const { return offset_; }

 private:
  explicit TarWriter(File file) : file_(std::move(file)) {}
  Status WriteHeader(const std::string& name, uint64_t size, char type);
  File file_;
  uint64_t offset_ = 0;
};

}  // namespace stoker
