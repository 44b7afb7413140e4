// formats/gzip_member.h — a `.gz` member (webdataset's `txt.gz`, `json.gz`,
// `npy.gz`, `cls.gz`) inflated whole before its field's decoder runs, as
// webdataset's decoder does (its gzfilter: the member's extension chain ends
// in ".gz", the data is gunzipped and decoded by the extension before it).
//
// Bounded: the output may not exceed a limit the caller gives (the field's
// max_bytes where it has one), so a gzip bomb is an error naming the limit,
// not an allocation of what its trailer claims. Concatenated gzip members
// (RFC 1952 allows them; `cat a.gz b.gz`) inflate to their concatenation, and
// zero bytes after a member are padding, as Python's gzip.GzipFile (what
// webdataset's gzfilter calls) reads them.
// Thread-safety: GzipInflater is one per thread (it owns a libdeflate
// decompressor and the output buffer, both reused).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "stoker/status.h"

struct libdeflate_decompressor;

namespace stoker {

// The limit for fields without a max_bytes (images, npy, npz, scalars): a
// decompressed member past it is refused rather than allocated.
inline constexpr size_t kGzipMemberDefaultLimit = size_t{1} << 30;

// True when a field (a member's extension chain) names gzip data: it ends in
// ".gz", any case ("txt.gz", "JSON.GZ"; "gz" alone is not a chain).
bool IsGzipField(std::string_view field);

class GzipInflater {
 public:
  GzipInflater();
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  // Inflates `gz` (one or more gzip members) and returns the bytes, valid
  // until the next call. DataLoss when it is not gzip, is corrupt or
  // truncated (naming the compressed byte offset of the gzip member that
  // failed), or inflates past `limit` bytes.
  Result<std::span<const uint8_t>> Inflate(std::span<const uint8_t> gz, size_t limit);

 private:
  libdeflate_decompressor* d_ = nullptr;
  std::vector<uint8_t> out_;
};

}  // namespace stoker
