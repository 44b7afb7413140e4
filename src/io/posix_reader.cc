// io/posix_reader.cc — see posix_reader.h.
#include "io/posix_reader.h"

namespace stoker {

PosixReader::PosixReader(File owned, uint64_t size) : owned_(std::move(owned)), file_(&owned_), size_(size) {}

Result<std::unique_ptr<PosixReader>> PosixReader::Open(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  return std::unique_ptr<PosixReader>(new PosixReader(std::move(f), size));
}

Result<size_t> PosixReader::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  return file_->PReadSome(offset, out);
}

}  // namespace stoker
