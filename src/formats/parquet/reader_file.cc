// formats/parquet/reader_file.cc — see reader_file.h.
#include "formats/parquet/reader_file.h"

#include <arrow/buffer.h>

#include <algorithm>

namespace stoker {

arrow::Result<int64_t> ReaderFile::ReadAt(int64_t position, int64_t nbytes, void* out) {
  if (position < 0 || nbytes < 0) return arrow::Status::Invalid("negative read position or length");
  const uint64_t size = reader_->Size();
  const uint64_t begin = std::min<uint64_t>(static_cast<uint64_t>(position), size);
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(nbytes), size - begin);  // Arrow's short read at the end
  // RandomAccessReader::PRead's loop, over the virtual ReadAt: the plugin
  // calls no out-of-line code of the engine (formats/parquet/engine.h).
  uint8_t* dest = static_cast<uint8_t*>(out);
  uint64_t done = 0;
  while (done < n) {
    Result<size_t> got = reader_->ReadAt(begin + done, std::span<uint8_t>(dest + done, n - done));
    if (!got.ok()) return arrow::Status::IOError(got.status().message());
    if (*got == 0) {
      return arrow::Status::IOError(reader_->Name() + ": short read at offset " + std::to_string(begin) + ": wanted " +
                                    std::to_string(n) + " bytes, the object has " + std::to_string(done));
    }
    done += *got;
  }
  return static_cast<int64_t>(n);
}

arrow::Result<std::shared_ptr<arrow::Buffer>> ReaderFile::ReadAt(int64_t position, int64_t nbytes) {
  ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ResizableBuffer> buf, arrow::AllocateResizableBuffer(nbytes));
  ARROW_ASSIGN_OR_RAISE(int64_t n, ReadAt(position, nbytes, buf->mutable_data()));
  ARROW_RETURN_NOT_OK(buf->Resize(n, /*shrink_to_fit=*/false));
  return std::shared_ptr<arrow::Buffer>(std::move(buf));
}

arrow::Result<int64_t> ReaderFile::Read(int64_t nbytes, void* out) {
  ARROW_ASSIGN_OR_RAISE(int64_t n, ReadAt(position_, nbytes, out));
  position_ += n;
  return n;
}

arrow::Result<std::shared_ptr<arrow::Buffer>> ReaderFile::Read(int64_t nbytes) {
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buf, ReadAt(position_, nbytes));
  position_ += buf->size();
  return buf;
}

arrow::Status ReaderFile::Seek(int64_t position) {
  if (position < 0) return arrow::Status::Invalid("negative seek");
  position_ = position;
  return arrow::Status::OK();
}

}  // namespace stoker
