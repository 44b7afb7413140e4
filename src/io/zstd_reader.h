// io/zstd_reader.h — a zstd-compressed object read as the bytes it holds: a
// `.tar.zst` shard served to ScanTar and the reader threads as the plain tar.
//
// Design: a zstd decoder's state cannot be saved mid-frame, so the only
// restart points are frame starts. Opening decompresses the object once and
// records where each frame starts (compressed and uncompressed offsets); a
// read restarts at the last frame start at or before it and discards up to
// that point. Shards written in many frames (`pzstd`, the seekable format,
// or chunks compressed one by one and concatenated) read randomly at the
// cost of one frame; a shard of one large frame costs a decompression from its
// start per out-of-order read, so for it use `shuffle_buffer=N` (reads in
// shard order reuse their decompressor: each shard is decompressed once) or
// repack (`stoker pack`).
// Reads, the cursor pool and the process-wide table cache are
// io/restart_reader.h's, shared with io/gzip_reader.h.
// A damaged stream (truncated, corrupt, checksum mismatch) does not fail the
// open: Size() counts the bytes decoded before the fault and Damage() says
// what broke where, so the tar scan above can name the member it cuts.
// Thread-safety: as every RandomAccessReader, ReadAt from many threads.
#pragma once

#include <cstdint>
#include <memory>

#include "io/reader.h"

namespace stoker {

bool IsZstdMagic(const uint8_t* p, size_t n);

Result<std::unique_ptr<RandomAccessReader>> OpenZstdReader(std::unique_ptr<RandomAccessReader> raw);

}  // namespace stoker
