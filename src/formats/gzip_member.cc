// formats/gzip_member.cc — whole-member gunzip with libdeflate (see header).
// libdeflate inflates into a buffer of known size and reports "insufficient
// space" otherwise; the gzip trailer's ISIZE (the size mod 2^32) is a hint for
// the first try, and the buffer doubles up to the limit on a miss, so a lying
// trailer costs a retry, never more than the limit.
#include "formats/gzip_member.h"

#include <libdeflate.h>

#include <algorithm>
#include <string>

namespace stoker {

bool IsGzipField(std::string_view field) {
  if (field.size() < 4) return false;
  std::string_view tail = field.substr(field.size() - 3);
  return tail[0] == '.' && (tail[1] == 'g' || tail[1] == 'G') && (tail[2] == 'z' || tail[2] == 'Z');
}

GzipInflater::GzipInflater() : d_(libdeflate_alloc_decompressor()) {}
GzipInflater::~GzipInflater() { libdeflate_free_decompressor(d_); }

Result<std::span<const uint8_t>> GzipInflater::Inflate(std::span<const uint8_t> gz, size_t limit) {
  if (d_ == nullptr) return Internal("libdeflate could not allocate a decompressor");
  size_t in_at = 0;
  size_t out_size = 0;
  while (in_at < gz.size()) {
    if (in_at > 0 && gz[in_at] == 0) {  // zeros after a member (padding): skipped, as Python's GzipFile does
      ++in_at;
      continue;
    }
    const std::span<const uint8_t> in = gz.subspan(in_at);
    if (in.size() < 2 || in[0] != 0x1f || in[1] != 0x8b) {
      if (in_at == 0) return DataLoss("the member's name ends in .gz but its data is not gzip (no 1f 8b magic)");
      return DataLoss("gzip data has " + std::to_string(in.size()) + " bytes that are not a gzip member at "
                      "compressed byte " + std::to_string(in_at));
    }
    // The trailer holds this member's size only when it is the last member; a guess otherwise.
    const size_t isize = in.size() < 4 ? 0
                                       : size_t{in[in.size() - 4]} | size_t{in[in.size() - 3]} << 8 |
                                             size_t{in[in.size() - 2]} << 16 | size_t{in[in.size() - 1]} << 24;
    size_t room = std::min(limit - out_size, std::max<size_t>({isize, in.size() * 4, 4096}));
    for (;;) {
      if (out_.size() < out_size + room) out_.resize(out_size + room);
      size_t in_used = 0, out_used = 0;
      const libdeflate_result r = libdeflate_gzip_decompress_ex(d_, in.data(), in.size(), out_.data() + out_size,
                                                                room, &in_used, &out_used);
      if (r == LIBDEFLATE_SUCCESS) {
        in_at += in_used;
        out_size += out_used;
        break;
      }
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
        if (out_size + room >= limit) {
          return DataLoss("gzip data inflates past the limit of " + std::to_string(limit) +
                          " bytes (max_bytes for text/json/bytes fields)");
        }
        room = std::min(limit - out_size, room * 2);
        continue;
      }
      return DataLoss("gzip data is corrupt or truncated in the gzip member at compressed byte " +
                      std::to_string(in_at) + " (of " + std::to_string(gz.size()) + ")");
    }
  }
  return std::span<const uint8_t>(out_.data(), out_size);
}

}  // namespace stoker
