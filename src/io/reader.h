// io/reader.h — the one reader interface beneath the pipeline: positional
// reads of one object, whatever stores it (a local file, an HTTP(S) URL, an
// S3 object). Formats and the pipeline read shards through it only, so every
// format gains every storage at once.
//
// OpenReader picks the implementation from the URL: "http://", "https://" ->
// HttpReader; "s3://bucket/key" -> HttpReader signed with AWS SigV4 (io/s3.h);
// "hf://datasets/ORG/NAME/PATH" -> HttpReader on the Hub's resolve URL
// (io/hf.h); another "scheme://" is InvalidArgument naming those read
// (io/url.h); anything else is a local path -> PosixReader. A URL's query is
// taken literally; names (".gz", ".idx") are read from its path (io/url.h).
// IoOptions (stoker/storage_options.h) say where a store is and how long a
// request retries; each loader carries its own. DefaultIoOptions is what a
// caller without a loader uses (the CLI, index loads): the environment now,
// unless SetDefaultIoOptions overrode it (the CLI's flags, tests).
// Thread-safety: a reader's ReadAt, Size and Name are safe from many threads
// at once; IoCounters are relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "stoker/status.h"
#include "stoker/storage_options.h"

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

using IoOptions = StorageOptions;

IoOptions DefaultIoOptions();
void SetDefaultIoOptions(const IoOptions& options);
void ResetDefaultIoOptions();  // back to the environment

// Process-wide counters of remote traffic (all readers).
struct IoCounters {
  std::atomic<uint64_t> requests{0};    // HTTP requests sent (HEAD, GET, LIST), retries included
  std::atomic<uint64_t> retries{0};     // requests repeated after a fault
  std::atomic<uint64_t> bytes{0};       // body bytes received
  std::atomic<uint64_t> throttled{0};   // 429 / 503 responses
  std::atomic<uint64_t> failures{0};    // requests that spent their retry budget
  // The outage now: requests between a failed attempt and their end, and
  // when the faults began (steady-clock ns of the first fault since the last
  // success; 0: no fault since). Both reset by the next success.
  std::atomic<int64_t> retrying{0};
  std::atomic<int64_t> faulting_since_ns{0};
  std::atomic<uint64_t> outage_ns_ended{0};  // the lengths of outages that ended, summed
  std::atomic<uint64_t> cache_hits{0};      // objects served from the local cache
  std::atomic<uint64_t> cache_misses{0};    // objects fetched into it
  std::atomic<uint64_t> cache_corrupt{0};   // entries found damaged and fetched again
  std::atomic<uint64_t> cache_evictions{0}; // entries deleted for the budget
  std::atomic<uint64_t> latency_ns{0};  // sum of time to first byte... of every request
  // Request latency histogram: bucket i counts requests of < 2^i ms (last: the rest).
  static constexpr int kBuckets = 16;
  std::atomic<uint64_t> latency_ms_log2[kBuckets] = {};
  void RecordLatency(uint64_t ns);
  // Seconds without a successful request while some request is retrying; 0 otherwise.
  double OutageSeconds() const;
  // Every outage's seconds so far, the one going on included (a counter:
  // its growth over a window is the window's time without a success).
  double OutageSecondsTotal() const;
  // The last fault, for messages: "HTTP 503 on GET http://host/a.tar".
  std::string LastFault() const;
  void SetLastFault(std::string what);

 private:
  mutable std::mutex last_fault_mu_;
  std::string last_fault_;  // guarded by last_fault_mu_
};
IoCounters& GlobalIoCounters();

bool IsRemoteUrl(const std::string& url);

// `path` as named inside the file or object `base`: an absolute path or a
// URL as it is, a relative one from base's directory (or URL prefix).
std::string ResolveFrom(const std::string& base, const std::string& path);

// A gzip- or zstd-compressed object (by its magic bytes, whatever its name;
// a remote one named *.gz, *.tgz, *.zst) is opened through io/gzip_reader.h
// or io/zstd_reader.h: reads see the uncompressed bytes.
// Callers with a loader pass its storage options; others get the defaults.
Result<std::unique_ptr<RandomAccessReader>> OpenReader(const std::string& url,
                                                       const IoOptions& options = DefaultIoOptions());
// The same without the cache (the cache's own fetches; local paths too).
Result<std::unique_ptr<RandomAccessReader>> OpenRemoteUncached(const std::string& url, const IoOptions& options);
// A small whole object (an index sidecar). NotFound when it does not exist.
Result<std::string> ReadWholeObject(const std::string& url, const IoOptions& options = DefaultIoOptions());

}  // namespace stoker
