// formats/parquet/reader_file.h — Arrow's RandomAccessFile over stoker's
// RandomAccessReader (io/reader.h), so Arrow's Parquet reader reads local
// files, HTTP and S3 through stoker's readers: their ranged reads, retries,
// deadlines, cancellation and credentials, not Arrow's filesystems.
// Arrow asks for whole column chunks and the footer by ReadAt; each becomes
// one read (one ranged GET remotely). A short read is an error naming
// the object and offset, carried through Arrow as IOError.
// Thread-safety: ReadAt from many threads (the reader's contract); the
// stream position (Read/Seek/Tell) belongs to one thread, as in Arrow's files.
#pragma once

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

#include "io/reader.h"

namespace stoker {

class ReaderFile : public arrow::io::RandomAccessFile {
 public:
  // `reader` must outlive this file (callers hold its lease while Arrow reads).
  explicit ReaderFile(const RandomAccessReader* reader) : reader_(reader) {}

  arrow::Result<int64_t> GetSize() override { return static_cast<int64_t>(reader_->Size()); }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override;

  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override;
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override;
  arrow::Status Seek(int64_t position) override;
  arrow::Result<int64_t> Tell() const override { return position_; }
  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }

 private:
  const RandomAccessReader* reader_;
  int64_t position_ = 0;
  bool closed_ = false;
};

}  // namespace stoker
