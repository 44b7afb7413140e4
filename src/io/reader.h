// io/reader.h — the one reader interface beneath the pipeline: positional
// reads of one object, whatever stores it (a local file, an HTTP(S) URL, an
// S3 object). Formats and the pipeline read shards through it only, so every
// format gains every storage at once.
//
// OpenReader picks the implementation from the URL: "http://", "https://" ->
// HttpReader; "s3://bucket/key" -> HttpReader signed with AWS SigV4 (io/s3.h);
// anything else is a local path -> PosixReader.
// IoOptions come from the environment once per process (DefaultIoOptions):
//   STOKER_IO_ATTEMPTS (6)        tries per request, the first included
//   STOKER_IO_TIMEOUT_MS (30000)  per-request deadline (connect + transfer)
//   STOKER_IO_BACKOFF_MS (100)    first retry delay; doubles, jittered, capped
//   STOKER_IO_BACKOFF_MAX_MS (5000)
//   STOKER_S3_ENDPOINT, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL: an
//   S3-compatible endpoint, addressed path-style.
//   STOKER_CACHE_DIR, STOKER_CACHE_BYTES (default 64 GiB): the local cache of
//   remote objects (io/cache_reader.h); no directory, no cache.
// SetDefaultIoOptions overrides them (the CLI's --s3-endpoint, tests).
// Thread-safety: a reader's ReadAt, Size and Name are safe from many threads
// at once; IoCounters are relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "stoker/status.h"

namespace stoker {

class RandomAccessReader {
 public:
  virtual ~RandomAccessReader() = default;
  // Reads up to out.size() bytes at offset; returns the count (0 at the end).
  virtual Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const = 0;
  virtual uint64_t Size() const = 0;
  virtual const std::string& Name() const = 0;  // path or URL, for messages
  // How many bytes a sequential scan should ask for at once: a page for a
  // local file, megabytes for a remote object (one round trip each).
  virtual size_t PreferredReadSize() const { return 64 * 1024; }
  virtual bool remote() const { return false; }
  // A reader that decompresses (io/gzip_reader.h, io/zstd_reader.h): the codec's name, else null.
  virtual const char* Compression() const { return nullptr; }
  // A decompressing reader whose stream broke: what broke where. Size() then
  // counts only the bytes before the fault. Ok for every other reader.
  virtual Status Damage() const { return Status::Ok(); }

  // Exactly out.size() bytes at offset; a short read is DataLoss naming the
  // object, offset and how many bytes were there (as File::PRead).
  Status PRead(uint64_t offset, std::span<uint8_t> out) const;

  // As PRead, except that each detour's bytes [d.at, d.at + d.dest.size()) of
  // the range land in d.dest instead of out (whose bytes there are then
  // unspecified). Detours are in ascending order and disjoint. A local file
  // does it in one preadv: the detoured bytes are copied once, from the page
  // cache to their destination. The default reads all into out, then copies.
  struct Detour {
    size_t at = 0;
    std::span<uint8_t> dest;
  };
  virtual Status PReadDetoured(uint64_t offset, std::span<uint8_t> out, std::span<const Detour> detours) const;
};

struct IoOptions {
  int attempts = 6;
  int timeout_ms = 30000;
  int backoff_ms = 100;
  int backoff_max_ms = 5000;
  std::string s3_endpoint;  // "" : AWS, virtual-hosted style
  std::string profile;      // AWS profile; "" : AWS_PROFILE, else "default" (io/aws_credentials.h)
  std::string region;       // AWS region; "" : AWS_REGION, ..., the profile's, us-east-1
  std::string cache_dir;    // "" : no cache
  uint64_t cache_bytes = 64ull << 30;
};

const IoOptions& DefaultIoOptions();
void SetDefaultIoOptions(const IoOptions& options);

// Process-wide counters of remote traffic (all readers).
struct IoCounters {
  std::atomic<uint64_t> requests{0};    // HTTP requests sent (HEAD, GET, LIST), retries included
  std::atomic<uint64_t> retries{0};     // requests repeated after a fault
  std::atomic<uint64_t> bytes{0};       // body bytes received
  std::atomic<uint64_t> throttled{0};   // 429 / 503 responses
  std::atomic<uint64_t> failures{0};    // requests that spent their retry budget
  std::atomic<uint64_t> cache_hits{0};      // objects served from the local cache
  std::atomic<uint64_t> cache_misses{0};    // objects fetched into it
  std::atomic<uint64_t> cache_corrupt{0};   // entries found damaged and fetched again
  std::atomic<uint64_t> cache_evictions{0}; // entries deleted for the budget
  std::atomic<uint64_t> latency_ns{0};  // sum of time to first byte... of every request
  // Request latency histogram: bucket i counts requests of < 2^i ms (last: the rest).
  static constexpr int kBuckets = 16;
  std::atomic<uint64_t> latency_ms_log2[kBuckets] = {};
  void RecordLatency(uint64_t ns);
};
IoCounters& GlobalIoCounters();

bool IsRemoteUrl(const std::string& url);

// A gzip- or zstd-compressed object (by its magic bytes, whatever its name;
// a remote one named *.gz, *.tgz, *.zst) is opened through io/gzip_reader.h
// or io/zstd_reader.h: reads see the uncompressed bytes.
Result<std::unique_ptr<RandomAccessReader>> OpenReader(const std::string& url);
// The same without the cache (the cache's own fetches; local paths too).
Result<std::unique_ptr<RandomAccessReader>> OpenRemoteUncached(const std::string& url, const IoOptions& options);
// A small whole object (an index sidecar). NotFound when it does not exist.
Result<std::string> ReadWholeObject(const std::string& url);

}  // namespace stoker
