// observe/histogram.h — a latency histogram cheap enough for the hot path.
//
// Buckets are powers of two of microseconds (bucket i holds [2^(i-1), 2^i) µs,
// bucket 0 holds < 1 µs), counted with relaxed atomics: one increment per
// record, no lock. Percentiles come from a snapshot, interpolated inside the
// bucket; the error is bounded by the bucket width (a factor of 2), enough to
// tell a page-cache hit (µs) from a disk read (ms) from a stall (s).
// Thread-safety: Record from any thread; Snapshot from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace stoker {

class LatencyHistogram {
 public:
  static constexpr int kBuckets = 36;  // up to 2^35 µs, ~9.5 hours

  void Record(uint64_t ns) {
    uint64_t us = ns / 1000;
    int b = us == 0 ? 0 : 64 - __builtin_clzll(us);
    if (b >= kBuckets) b = kBuckets - 1;
    buckets_[b].fetch_add(1, std::memory_order_relaxed);
  }

  std::vector<uint64_t> Snapshot() const {
    std::vector<uint64_t> out(kBuckets);
    for (int i = 0; i < kBuckets; ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
    return out;
  }

  // q in [0, 1] of the counts (e.g. a difference of two snapshots); seconds.
  static double Percentile(const std::vector<uint64_t>& counts, double q);
  // Upper edge of bucket i in seconds.
  static double BucketUpperSeconds(int i) { return i == 0 ? 1e-6 : static_cast<double>(1ull << i) * 1e-6; }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
};

}  // namespace stoker
