// tests/fuzz/gzip_member_fuzz.cc — a ".gz" member's inflate
// (formats/gzip_member.h, libdeflate) on any bytes, against a reader written
// here as Python's gzip.GzipFile reads (webdataset's gzfilter), with zlib's raw
// inflate: RFC 1952 members one after another, zero bytes between and after
// them skipped, anything else an error. Same verdict (but see the one
// leniency of libdeflate below) and, when accepted, the same bytes; past the limit both
// refuse (the input's first byte picks a limit of 0 to 255 KiB).
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include "formats/gzip_member.h"

namespace {

// The header as RFC 1952 lays it out and Python's gzip reads it (the header
// CRC16 skipped, not checked, as Python does; reserved flag bits refused, as
// RFC 1952 asks and Python does not), raw deflate through zlib, then the
// trailer's CRC32 and size checked. Returns where the member ends, or 0.
size_t Member(std::span<const uint8_t> gz, size_t at, size_t limit, std::vector<uint8_t>* out, bool* zlib_data_error) {
  size_t p = at;
  auto need = [&](size_t n) { return gz.size() - p >= n; };
  if (!need(10) || gz[p] != 0x1f || gz[p + 1] != 0x8b || gz[p + 2] != 8) return 0;
  const uint8_t flags = gz[p + 3];
  if (flags & 0xe0) return 0;
  p += 10;
  if (flags & 4) {  // FEXTRA
    if (!need(2)) return 0;
    const size_t n = gz[p] | size_t{gz[p + 1]} << 8;
    p += 2;
    if (!need(n)) return 0;
    p += n;
  }
  for (uint8_t bit : {uint8_t{8}, uint8_t{16}}) {  // FNAME, FCOMMENT: zero-terminated
    if (!(flags & bit)) continue;
    while (p < gz.size() && gz[p] != 0) ++p;
    if (p == gz.size()) return 0;
    ++p;
  }
  if (flags & 2) {  // FHCRC
    if (!need(2)) return 0;
    p += 2;
  }
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return 0;
  z.next_in = const_cast<Bytef*>(gz.data() + p);
  z.avail_in = static_cast<uInt>(gz.size() - p);
  const size_t first = out->size();
  std::vector<uint8_t> chunk(1 << 16);
  int r = Z_OK;
  while (r == Z_OK) {
    z.next_out = chunk.data();
    z.avail_out = static_cast<uInt>(chunk.size());
    r = inflate(&z, Z_NO_FLUSH);
    out->insert(out->end(), chunk.data(), chunk.data() + (chunk.size() - z.avail_out));
    if (out->size() > limit) r = Z_DATA_ERROR;
  }
  p = gz.size() - z.avail_in;
  inflateEnd(&z);
  *zlib_data_error = r == Z_DATA_ERROR && out->size() <= limit;
  if (r != Z_STREAM_END || !need(8)) return 0;
  const size_t n = out->size() - first;
  const uint32_t crc = static_cast<uint32_t>(crc32(0, out->data() + first, static_cast<uInt>(n)));
  const uint32_t want_crc = gz[p] | uint32_t{gz[p + 1]} << 8 | uint32_t{gz[p + 2]} << 16 | uint32_t{gz[p + 3]} << 24;
  const uint32_t want_size = gz[p + 4] | uint32_t{gz[p + 5]} << 8 | uint32_t{gz[p + 6]} << 16 |
                             uint32_t{gz[p + 7]} << 24;
  if (crc != want_crc || static_cast<uint32_t>(n) != want_size) return 0;
  return p + 8;
}

// Python's GzipFile loop: members, zeros between and after them skipped.
bool Reference(std::span<const uint8_t> gz, size_t limit, std::vector<uint8_t>* out, bool* zlib_data_error) {
  out->clear();
  size_t at = 0;
  while (at < gz.size()) {
    if (at > 0 && gz[at] == 0) {
      ++at;
      continue;
    }
    at = Member(gz, at, limit, out, zlib_data_error);
    if (at == 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t limit = size_t{data[0]} << 10;
  const std::span<const uint8_t> gz(data + 1, size - 1);
  std::vector<uint8_t> want;
  bool zlib_data_error = false;
  const bool ok = Reference(gz, limit, &want, &zlib_data_error);
  stoker::GzipInflater inflater;
  auto got = inflater.Inflate(gz, limit);
  // libdeflate decodes a few deflate streams zlib calls invalid (e.g. the
  // fixed code's unused length symbols); its result still had to match the
  // trailer's CRC-32 and size. Every other difference is a failure.
  if (got.ok() != ok && !(got.ok() && zlib_data_error)) {
    fprintf(stderr, "GzipInflater: %s; zlib: %s\n", got.ok() ? "ok" : got.status().ToString().c_str(),
            ok ? "ok" : "refused");
    __builtin_trap();
  }
  if (ok && (got->size() != want.size() || !std::equal(want.begin(), want.end(), got->begin()))) {
    fprintf(stderr, "GzipInflater gave %zu bytes, zlib %zu (or other bytes)\n", got->size(), want.size());
    __builtin_trap();
  }
  return 0;
}
