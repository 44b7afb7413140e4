// io/posix_reader.cc — see posix_reader.h.
#include "io/posix_reader.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace stoker {

PosixReader::PosixReader(File owned, uint64_t size) : owned_(std::move(owned)), file_(&owned_), size_(size) {}

Result<std::unique_ptr<PosixReader>> PosixReader::Open(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  return std::unique_ptr<PosixReader>(new PosixReader(std::move(f), size));
}

std::unique_ptr<PosixReader> PosixReader::Adopt(File file, uint64_t size) {
  return std::unique_ptr<PosixReader>(new PosixReader(std::move(file), size));
}

Result<size_t> PosixReader::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  return file_->PReadSome(offset, out);
}

Status PosixReader::PReadDetoured(uint64_t offset, std::span<uint8_t> out, std::span<const Detour> detours) const {
  if (detours.empty()) return PRead(offset, out);
  // The range as pieces: out's gaps and the detours' destinations, in order.
  thread_local std::vector<iovec> pieces;
  pieces.clear();
  size_t pos = 0;
  for (const Detour& d : detours) {
    if (d.at < pos || d.at + d.dest.size() > out.size()) return InvalidArgument("read detours overlap or overrun");
    if (d.at > pos) pieces.push_back({out.data() + pos, d.at - pos});
    if (!d.dest.empty()) pieces.push_back({d.dest.data(), d.dest.size()});
    pos = d.at + d.dest.size();
  }
  if (pos < out.size()) pieces.push_back({out.data() + pos, out.size() - pos});
  size_t first = 0, done = 0;
  while (first < pieces.size()) {
    const int n = static_cast<int>(std::min<size_t>(pieces.size() - first, IOV_MAX));
    const ssize_t got = ::preadv(file_->fd(), pieces.data() + first, n, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(Name() + ": read at offset " + std::to_string(offset + done) + ": " + std::strerror(errno));
    }
    if (got == 0) {
      return DataLoss(Name() + ": short read at offset " + std::to_string(offset) + ": wanted " +
                      std::to_string(out.size()) + " bytes, the object has " + std::to_string(done));
    }
    done += static_cast<size_t>(got);
    // Skip the pieces filled; trim the one filled in part.
    for (size_t left = static_cast<size_t>(got); left > 0;) {
      iovec& p = pieces[first];
      if (left >= p.iov_len) {
        left -= p.iov_len;
        ++first;
      } else {
        p.iov_base = static_cast<uint8_t*>(p.iov_base) + left;
        p.iov_len -= left;
        left = 0;
      }
    }
    while (first < pieces.size() && pieces[first].iov_len == 0) ++first;
  }
  return Status::Ok();
}

}  // namespace stoker
