// io/restart_reader.cc — the non-template parts of io/restart_reader.h.
#include "io/restart_reader.h"

#include <sys/stat.h>

namespace stoker {

Result<size_t> RestartCursor::Refill(const RandomAccessReader& raw, const char* codec) {
  const uint64_t csize = raw.Size();
  const size_t want = static_cast<size_t>(std::min<uint64_t>(in.size(), csize > read_off ? csize - read_off : 0));
  size_t got = 0;
  if (want > 0) {
    STOKER_ASSIGN_OR_RETURN(got, raw.ReadAt(read_off, {in.data(), want}));
  }
  if (got == 0) {
    return DataLoss(raw.Name() + ": " + codec + " stream ends at compressed offset " + std::to_string(read_off) +
                    " (uncompressed offset " + std::to_string(out) + "); the file changed since it was opened?");
  }
  read_off += got;
  return got;
}

std::string RestartTableKey(const RandomAccessReader& raw, const std::string& variant) {
  std::string key = raw.Name() + "\n" + std::to_string(raw.Size()) + "\n" + variant;
  struct stat st{};
  if (!raw.remote() && stat(raw.Name().c_str(), &st) == 0) {
    key += "\n" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  return key;
}

}  // namespace stoker
