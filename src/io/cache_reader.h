// io/cache_reader.h — the optional local cache of remote objects: a directory
// of whole objects with a byte budget and LRU eviction, shared safely by the
// processes (ranks) of one node and surviving restarts.
//
// Entry for URL u (k = 16 hex digits of a hash of u):
//   k.data   the object's bytes;  k.meta  "stoker-cache 1\n<size>\n<etag>\n<checksum>\n<url>\n"
// A miss takes the flock of k.lock (so one process fetches and the others
// wait and then hit), streams the object in large ranged GETs into a temp
// file, fsyncs it, and renames data then meta into place (meta last: the
// commit). A hit requires meta and data to agree on size and checksum (a
// 64-bit hash of the whole file, checked at every open): a corrupt or torn
// entry is deleted and fetched again. A hit sends no request at all (the
// pinned size/ETag are those in meta), so an epoch over cached shards reads
// no remote byte. The access time is the data file's mtime (touched on every
// hit); after a fetch, while the directory holds more than the budget, the
// least recently used entries are deleted under the directory's flock
// (.lock). A reader keeps its open descriptor, so deleting an entry never
// breaks a read in flight. Objects larger than the budget are not cached.
// Thread-safety: Open from many threads and processes; the reader it returns
// is a PosixReader (concurrent preads).
#pragma once

#include "io/reader.h"

namespace stoker {

// Opens url (remote) through the cache in options.cache_dir.
Result<std::unique_ptr<RandomAccessReader>> OpenCached(const std::string& url, const IoOptions& options);

// 64-bit content checksum used by the cache (exposed for tests).
uint64_t CacheChecksum(const uint8_t* data, size_t n, uint64_t seed = 0);

}  // namespace stoker
