// io/gzip_reader.h — a gzip-compressed object read as the bytes it holds: a
// `.tar.gz` shard served to ScanTar and the reader threads as the plain tar,
// with positional reads in uncompressed offsets.
//
// Design (zlib's zran): opening decompresses the object once and keeps an
// access point every `span` bytes of output (default 1 MiB), at a deflate
// block boundary: its compressed offset, the bit offset inside that byte and
// the 32 KiB of output before it (deflate's back-reference window). A read at
// offset o restarts inflate at the last point at or before o, discards up to
// `span` bytes, then inflates straight into the caller's buffer. So random
// access costs at most `span` bytes of inflate per read, and memory is 32 KiB
// per span (3% of the uncompressed size at 1 MiB) while the table is cached.
// Reads, the pool of decompressors reused by reads in order, and the
// process-wide table cache (STOKER_GZIP_TABLE_CACHE_BYTES, default 256 MiB)
// are io/restart_reader.h's, shared with io/zstd_reader.h.
//
// A damaged stream (truncated, corrupt deflate data, CRC or length mismatch)
// does not fail the open: Size() then counts the bytes decoded before the
// fault, reads past it return end-of-file, and Damage() says what broke where
// (compressed and uncompressed offsets), so the tar scan above can name the
// member the fault cut (formats/sample_index.cc).
// Thread-safety: as every RandomAccessReader, ReadAt from many threads.
#pragma once

#include <cstdint>
#include <memory>

#include "io/reader.h"

namespace stoker {

inline constexpr uint64_t kGzipDefaultSpan = 1 << 20;

bool IsGzipMagic(const uint8_t* p, size_t n);

// Wraps `raw` (a gzip object: one or more concatenated members).
Result<std::unique_ptr<RandomAccessReader>> OpenGzipReader(std::unique_ptr<RandomAccessReader> raw,
                                                           uint64_t span = kGzipDefaultSpan);

// Access tables kept for reuse now, and their bytes (tests, doctor).
struct GzipTableCacheStats {
  size_t tables = 0;
  uint64_t bytes = 0;
  uint64_t builds = 0;  // tables built (a decompression pass each) since start
};
GzipTableCacheStats GzipTableCache();

}  // namespace stoker
