// io/mapped_reader.cc — see mapped_reader.h.
#include "io/mapped_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "io/fault_guard.h"

namespace stoker {

namespace {

}  // namespace

bool MappingEnabled() {
  const char* v = std::getenv("STOKER_MMAP");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

MappedReader::MappedReader(std::unique_ptr<PosixReader> file, std::shared_ptr<const FileMapping> mapping)
    : file_(std::move(file)), mapping_(std::move(mapping)), size_(mapping_->size()) {}

Result<std::unique_ptr<MappedReader>> MappedReader::Wrap(std::unique_ptr<PosixReader>* file, bool keep) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const FileMapping> m, FileMapping::Map((*file)->file(), keep));
  return std::unique_ptr<MappedReader>(new MappedReader(std::move(*file), std::move(m)));
}

Status MappedReader::Copy(uint64_t offset, std::span<uint8_t> out, bool streaming) const {
  if (out.empty()) return Status::Ok();
  uintptr_t fault = 0;
  const GuardedCopy done = CopyGuarded(out.data(), mapping_->data() + offset, out.size(), &fault, streaming);
  if (done == GuardedCopy::kCopied) return Status::Ok();
  if (done == GuardedCopy::kUnguarded) return file_->PRead(offset, out);
  const uintptr_t base = reinterpret_cast<uintptr_t>(mapping_->data());
  const uint64_t at = fault >= base && fault - base < size_ ? fault - base : offset;
  return DataLoss(Name() + ": the file has no data at offset " + std::to_string(at) + " (reading " +
                  std::to_string(out.size()) + " bytes at offset " + std::to_string(offset) +
                  "): it was truncated after it was opened, " + std::to_string(size_) + " bytes then");
}

Status MappedReader::StillThere(uint64_t offset, uint64_t end) const {
  struct stat st {};
  if (::fstat(file_->file().fd(), &st) != 0) return IoError(Name() + ": fstat: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) >= end) return Status::Ok();
  return DataLoss(Name() + ": short read at offset " + std::to_string(offset) + ": the file was truncated to " +
                  std::to_string(st.st_size) + " bytes while being read (" + std::to_string(size_) +
                  " when opened), the read needs " + std::to_string(end));
}

Result<size_t> MappedReader::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  if (offset >= size_ || out.empty()) return size_t{0};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), size_ - offset));
  STOKER_RETURN_IF_ERROR(Copy(offset, out.first(n)));
  STOKER_RETURN_IF_ERROR(StillThere(offset, offset + n));
  return n;
}

Status MappedReader::PReadDetoured(uint64_t offset, std::span<uint8_t> out, std::span<const Detour> detours) const {
  if (offset > size_ || out.size() > size_ - offset) {
    return DataLoss(Name() + ": short read at offset " + std::to_string(offset) + ": wanted " +
                    std::to_string(out.size()) + " bytes, the object has " +
                    std::to_string(offset < size_ ? size_ - offset : 0));
  }
  // The range as pieces, as PosixReader's preadv has them: out's gaps and the
  // detours' destinations, each copied once out of the mapping.
  size_t pos = 0;
  for (const Detour& d : detours) {
    if (d.at < pos || d.at + d.dest.size() > out.size()) return InvalidArgument("read detours overlap or overrun");
    STOKER_RETURN_IF_ERROR(Copy(offset + pos, out.subspan(pos, d.at - pos)));
    // A detour is a batch slot, read by the consumer long after: streamed.
    STOKER_RETURN_IF_ERROR(Copy(offset + d.at, d.dest, true));
    pos = d.at + d.dest.size();
  }
  STOKER_RETURN_IF_ERROR(Copy(offset + pos, out.subspan(pos)));
  return StillThere(offset, offset + out.size());
}

std::unique_ptr<RandomAccessReader> MapIfLocal(std::unique_ptr<RandomAccessReader> reader, bool keep, bool* mapped) {
  *mapped = false;
  if (reader->remote() || reader->Compression() != nullptr || reader->Size() == 0 || !MappingEnabled()) return reader;
  if (dynamic_cast<PosixReader*>(reader.get()) == nullptr) return reader;
  std::unique_ptr<PosixReader> posix(static_cast<PosixReader*>(reader.release()));
  Result<std::unique_ptr<MappedReader>> m = MappedReader::Wrap(&posix, keep);
  if (!m.ok()) return posix;  // mmap refused (address space, vm.max_map_count): pread it
  *mapped = true;
  return std::move(m).value();
}

Result<std::unique_ptr<RandomAccessReader>> OpenShardReader(const std::string& url, const IoOptions& io) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> r, OpenReader(url, io));
  bool mapped = false;
  return MapIfLocal(std::move(r), true, &mapped);
}

}  // namespace stoker
