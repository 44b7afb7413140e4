// cli/doctor_remote.cc — `stoker doctor` on remote shards (http://, https://,
// s3://): what the network path gives, and the reads in flight it needs.
//
// A remote source has no page cache to drop and no device to saturate; what
// decides the loader's configuration is the round-trip latency and the
// bandwidth that enough concurrent requests reach. The probe measures both
// with the loader's own reader (io/reader.h: the same retries, deadline and
// signing): small ranged GETs one at a time for latency, then large ranged
// GETs at rising concurrency for bandwidth. The recommendation is the
// smallest io_depth within 10% of the best bandwidth measured, checked
// against the bandwidth-delay product (bytes in flight = bandwidth x latency).
// Thread-safety: runs on the CLI's thread plus the probe threads it joins.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/reader.h"
#include "stoker/loader.h"

namespace stoker::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Depth {
  int depth = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double MBps() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// `depth` threads read `chunk`-byte ranges round the shards until `budget`
// bytes or `seconds` have passed (whichever first).
Result<Depth> Bandwidth(const std::vector<std::shared_ptr<RandomAccessReader>>& readers, int depth, size_t chunk,
                        uint64_t budget, double seconds) {
  std::atomic<uint64_t> next{0}, bytes{0};
  std::atomic<bool> failed{false};
  Status error;
  std::mutex error_mu;
  // Work items: (reader, offset) pairs in shard order, cycled.
  std::vector<std::pair<size_t, uint64_t>> items;
  for (size_t r = 0; r < readers.size(); ++r)
    for (uint64_t off = 0; off < readers[r]->Size(); off += chunk) items.emplace_back(r, off);
  if (items.empty()) return InvalidArgument("the shards are empty");
  const auto start = Clock::now();
  auto work = [&] {
    std::vector<uint8_t> buf(chunk);
    while (!failed && bytes.load() < budget && Since(start) < seconds) {
      const auto [r, off] = items[next.fetch_add(1) % items.size()];
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, readers[r]->Size() - off));
      Status st = readers[r]->PRead(off, std::span<uint8_t>(buf.data(), n));
      if (!st.ok()) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) error = st;
        return;
      }
      bytes += n;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < depth; ++i) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  if (failed) return error;
  return Depth{depth, bytes.load(), Since(start)};
}

}  // namespace

Status RunRemoteDoctor(const std::vector<std::string>& sources, bool json, double run_seconds) {
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> shards, ExpandSources(sources));
  if (shards.empty()) return NotFound("no shards in the sources");
  auto progress = [&](const char* what) {
    if (!json) std::fprintf(stderr, "doctor: %s...\n", what);
  };
  progress("opening remote shards");
  std::vector<std::shared_ptr<RandomAccessReader>> readers;
  uint64_t total = 0;
  const size_t probe_shards = std::min<size_t>(shards.size(), 16);  // enough to spread the requests
  for (size_t i = 0; i < probe_shards; ++i) {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> r, OpenReader(shards[i], DefaultIoOptions()));
    total += r->Size();
    readers.push_back(std::move(r));
  }

  // Latency: 4 KiB ranged GETs, one at a time (time to the last byte of a
  // tiny body is the round trip).
  progress("request latency (4 KiB ranged GETs, one at a time)");
  std::vector<double> lat;
  std::vector<uint8_t> small(4096);
  const int latency_requests = 12;
  for (int i = 0; i < latency_requests; ++i) {
    const RandomAccessReader& r = *readers[static_cast<size_t>(i) % readers.size()];
    const uint64_t size = r.Size();
    const uint64_t off = size > small.size() ? (size - small.size()) / latency_requests * i : 0;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(small.size(), size - off));
    const auto t = Clock::now();
    STOKER_RETURN_IF_ERROR(r.PRead(off, std::span<uint8_t>(small.data(), n)));
    lat.push_back(Since(t));
  }
  std::sort(lat.begin(), lat.end());
  const double p50 = lat[lat.size() / 2], p90 = lat[lat.size() * 9 / 10], lat_min = lat.front();

  // Bandwidth at rising concurrency: 1 MiB ranges (a coalesced run's order of size).
  progress("bandwidth at 1, 2, 4, 8, 16 and 32 requests in flight");
  const size_t chunk = 1 << 20;
  const double per_depth_s = std::max(0.3, run_seconds / 4);
  std::vector<Depth> depths;
  for (int d : {1, 2, 4, 8, 16, 32}) {
    STOKER_ASSIGN_OR_RETURN(Depth m, Bandwidth(readers, d, chunk, std::max<uint64_t>(total, 64ull << 20), per_depth_s));
    depths.push_back(m);
  }
  const Depth best = *std::max_element(depths.begin(), depths.end(),
                                       [](const Depth& a, const Depth& b) { return a.MBps() < b.MBps(); });
  int recommended = best.depth;
  for (const Depth& d : depths)
    if (d.MBps() >= 0.9 * best.MBps()) {
      recommended = d.depth;
      break;
    }
  // Bandwidth-delay product: requests of `chunk` bytes needed to keep the best
  // bandwidth in flight across one round trip, plus one being consumed.
  const double bdp_bytes = best.MBps() * 1e6 * p50;
  const int bdp_depth = static_cast<int>(std::ceil(bdp_bytes / chunk)) + 1;

  const IoCounters& io = GlobalIoCounters();
  Json report = {
      {"source", "remote"},
      {"shards", shards.size()},
      {"probed_shards", readers.size()},
      {"latency_s", {{"min", lat_min}, {"p50", p50}, {"p90", p90}, {"requests", lat.size()}}},
      {"bandwidth", Json::array()},
      {"best", {{"io_depth", best.depth}, {"mb_per_s", best.MBps()}}},
      {"bandwidth_delay_product_bytes", bdp_bytes},
      {"recommended", {{"io_depth", recommended}, {"bdp_io_depth", bdp_depth}, {"read_size_bytes", chunk}}},
      {"retries", io.retries.load()},
      {"throttled", io.throttled.load()},
  };
  for (const Depth& d : depths)
    report["bandwidth"].push_back({{"io_depth", d.depth}, {"mb_per_s", d.MBps()}, {"bytes", d.bytes},
                                   {"seconds", d.seconds}});
  if (json) {
    std::printf("%s\n", report.dump(1).c_str());
    return Status::Ok();
  }
  std::printf("remote source: %zu shards (%zu probed)\n", shards.size(), readers.size());
  std::printf("  request latency: p50 %.1f ms, p90 %.1f ms, min %.1f ms (4 KiB ranged GETs)\n", p50 * 1e3,
              p90 * 1e3, lat_min * 1e3);
  for (const Depth& d : depths) std::printf("  %2d in flight: %8.1f MB/s\n", d.depth, d.MBps());
  std::printf("  bandwidth-delay product: %s in flight (%d requests of 1 MiB)\n", FormatBytes(bdp_bytes).c_str(),
              bdp_depth);
  std::printf("recommended: io_depth %d (the fewest reads in flight within 10%% of the best %.1f MB/s); the loader "
              "coalesces a batch's neighbouring samples into one GET and reads io_depth batches ahead\n",
              recommended, best.MBps());
  if (io.throttled.load() > 0) {
    std::printf("note: the server throttled %llu requests (429/503): fewer in flight may be faster\n",
                static_cast<unsigned long long>(io.throttled.load()));
  }
  return Status::Ok();
}

}  // namespace stoker::cli
