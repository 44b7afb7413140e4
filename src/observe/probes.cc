// observe/probes.cc — see probes.h. The file probes use raw POSIX calls
// (mmap, mincore, posix_fadvise) behind small RAII holders; every failure is
// a Status naming the file and the call.
#include "observe/probes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/file.h"
#include "core/random.h"
#include "observe/histogram.h"

namespace stoker::probes {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
std::string Errno() { return std::strerror(errno); }

// A read-only mapping, unmapped on every path out.
class Mapping {
 public:
  Mapping(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~Mapping() {
    if (addr_ != MAP_FAILED) ::munmap(addr_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* addr() const { return addr_; }
  bool ok() const { return addr_ != MAP_FAILED; }

 private:
  void* addr_;
  size_t size_;
};

// A permutation of [0, n) without a table, fixed by the seed: i -> (a*i + b)
// mod n with a coprime to n visits each index once.
class AffinePermutation {
 public:
  AffinePermutation(uint64_t n, uint64_t seed) : n_(n) {
    SplitMix64 rng(seed);
    a_ = rng.Below(n) | 1;
    while (std::gcd(a_, n_) != 1) ++a_;
    b_ = rng.Below(n);
  }
  uint64_t operator()(uint64_t i) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a_) * i + b_) % n_);
  }

 private:
  uint64_t n_, a_ = 1, b_ = 0;
};

struct OpenFile {
  File file;
  uint64_t size = 0;
};

Result<std::vector<OpenFile>> OpenAll(const std::vector<std::string>& paths) {
  std::vector<OpenFile> out;
  out.reserve(paths.size());
  for (const std::string& p : paths) {
    STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(p));
    STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
    out.push_back({std::move(f), size});
  }
  return out;
}

}  // namespace

uint64_t CountResident(std::span<const unsigned char> mincore_vector) {
  uint64_t n = 0;
  for (unsigned char c : mincore_vector) n += c & 1;  // the other bits are reserved
  return n;
}

Result<Residency> FileResidency(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  Residency r;
  r.bytes = size;
  if (size == 0) return r;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  r.pages = (size + page - 1) / page;
  // Mapping touches nothing, so measuring does not change what it measures.
  Mapping map(::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd(), 0), size);
  if (!map.ok()) return IoError(path + ": mmap: " + Errno());
  std::vector<unsigned char> vec(r.pages);
  if (::mincore(map.addr(), size, vec.data()) != 0) return IoError(path + ": mincore: " + Errno());
  r.resident = CountResident(vec);
  return r;
}

Result<Residency> FilesResidency(const std::vector<std::string>& paths) {
  Residency total;
  for (const std::string& p : paths) {
    STOKER_ASSIGN_OR_RETURN(Residency r, FileResidency(p));
    total += r;
  }
  return total;
}

Status DropFromPageCache(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  // DONTNEED leaves dirty pages in place; a freshly written shard is mostly
  // dirty, so write it back first. EINVAL/EROFS: nothing to write back here.
  if (::fdatasync(f.fd()) != 0 && errno != EINVAL && errno != EROFS) {
    return IoError(path + ": fdatasync: " + Errno());
  }
  const int rc = ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) return IoError(path + ": posix_fadvise(DONTNEED): " + std::strerror(rc));
  return Status::Ok();
}

double ReadProbe::LatencyQuantile(double q) const {
  return latency.empty() ? 0 : LatencyHistogram::Percentile(latency, q);
}

Result<ReadProbe> SequentialRead(const std::vector<std::string>& paths, size_t chunk, const ReadLimits& limits) {
  if (chunk == 0) return InvalidArgument("SequentialRead: chunk of 0 bytes");
  STOKER_ASSIGN_OR_RETURN(std::vector<OpenFile> files, OpenAll(paths));
  std::vector<uint8_t> buf(chunk);
  LatencyHistogram hist;
  ReadProbe probe;
  const auto start = Clock::now();
  for (const OpenFile& f : files) {
    // Tell the kernel the truth about this probe's pattern: full readahead.
    (void)::posix_fadvise(f.file.fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    for (uint64_t off = 0; off < f.size; off += chunk) {
      if (probe.bytes >= limits.max_bytes || Since(start) >= limits.max_seconds) break;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, f.size - off));
      const auto t = Clock::now();
      STOKER_RETURN_IF_ERROR(f.file.PRead(off, std::span<uint8_t>(buf.data(), n)));
      hist.Record(static_cast<uint64_t>(Since(t) * 1e9));
      probe.reads++, probe.bytes += n;
    }
    (void)::posix_fadvise(f.file.fd(), 0, 0, POSIX_FADV_NORMAL);
  }
  probe.seconds = Since(start);
  probe.latency = hist.Snapshot();
  return probe;
}

Result<ReadProbe> RandomRead(const std::vector<std::string>& paths, size_t read_size, const ReadLimits& limits,
                             uint64_t seed) {
  if (read_size == 0) return InvalidArgument("RandomRead: read size of 0 bytes");
  STOKER_ASSIGN_OR_RETURN(std::vector<OpenFile> files, OpenAll(paths));
  // The files cut into page-aligned slots of read_size; every slot is read
  // at most once, so a cold probe of a small dataset does not warm the pages
  // it reads next (a repeat would be a page-cache hit, not a storage read).
  const uint64_t stride = (read_size + 4095) / 4096 * 4096;
  std::vector<uint64_t> ends;  // cumulative slot counts: a slot number picks its file
  uint64_t slots = 0;
  for (const OpenFile& f : files) ends.push_back(slots += f.size == 0 ? 0 : (f.size + stride - 1) / stride);
  ReadProbe probe;
  if (slots == 0) return probe;
  // Readahead would turn one random read into a 128 KiB one and flatter (or
  // wreck) the figure; a shuffled loader's reads get none of it either.
  for (const OpenFile& f : files) (void)::posix_fadvise(f.file.fd(), 0, 0, POSIX_FADV_RANDOM);
  const AffinePermutation order(slots, seed);
  std::vector<uint8_t> buf(read_size);
  LatencyHistogram hist;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < slots; ++i) {
    if (probe.bytes >= limits.max_bytes || Since(start) >= limits.max_seconds) break;
    const uint64_t slot = order(i);
    const size_t k = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), slot) - ends.begin());
    const OpenFile& f = files[k];
    const uint64_t off = (slot - (k == 0 ? 0 : ends[k - 1])) * stride;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(read_size, f.size - off));
    const auto t = Clock::now();
    STOKER_RETURN_IF_ERROR(f.file.PRead(off, std::span<uint8_t>(buf.data(), n)));
    hist.Record(static_cast<uint64_t>(Since(t) * 1e9));
    probe.reads++, probe.bytes += n;
  }
  probe.seconds = Since(start);
  probe.latency = hist.Snapshot();
  for (const OpenFile& f : files) (void)::posix_fadvise(f.file.fd(), 0, 0, POSIX_FADV_NORMAL);
  return probe;
}

Result<ReadProbe> WholeFileReads(const std::vector<std::string>& paths, const ReadLimits& limits, uint64_t seed) {
  ReadProbe probe;
  if (paths.empty()) return probe;
  const uint64_t n = paths.size();
  const AffinePermutation order(n, seed);
  std::vector<uint8_t> buf;
  LatencyHistogram hist;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    if (probe.bytes >= limits.max_bytes || Since(start) >= limits.max_seconds) break;
    const std::string& path = paths[static_cast<size_t>(order(i))];
    const auto t = Clock::now();
    // open + size + read + close: what a loader over loose files pays per sample.
    STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
    STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
    buf.resize(static_cast<size_t>(size));
    STOKER_RETURN_IF_ERROR(f.PRead(0, buf));
    hist.Record(static_cast<uint64_t>(Since(t) * 1e9));
    probe.reads++, probe.bytes += size;
  }
  probe.seconds = Since(start);
  probe.latency = hist.Snapshot();
  return probe;
}

const char* BottleneckName(Bottleneck b) {
  switch (b) {
    case Bottleneck::kNone: return "none";
    case Bottleneck::kStorage: return "storage";
    case Bottleneck::kDecode: return "decode";
    case Bottleneck::kUnknown: break;
  }
  return "unknown";
}

double RequiredRate(const Costs& c) { return c.step_s > 0 ? c.batch_size / c.step_s : 0; }

Prediction Predict(const Costs& c, int io_depth, int decode_threads) {
  Prediction p;
  constexpr double kUnbounded = 1e12;
  p.storage_rate = c.storage_bytes_per_s > 0 && c.sample_bytes > 0 ? c.storage_bytes_per_s / c.sample_bytes
                                                                    : kUnbounded;
  // Little's law: with io_depth reads in flight, each taking the latency, no
  // more than io_depth / latency samples per second arrive.
  if (c.read_latency_s > 0) p.storage_rate = std::min(p.storage_rate, std::max(1, io_depth) / c.read_latency_s);
  const int cores = std::max(1, c.cores);
  const double avail = c.cores_available > 0 ? std::min<double>(c.cores_available, cores) : cores;
  const double usable = std::min<double>(std::clamp(decode_threads, 1, cores), avail);
  p.cpu_rate = kUnbounded;
  if (c.decode_s > 0) p.cpu_rate = usable / c.decode_s;
  // Readers copy from the page cache on the same cores the decoders use.
  if (c.decode_s + c.read_cpu_s > 0) p.cpu_rate = std::min(p.cpu_rate, avail / (c.decode_s + c.read_cpu_s));
  p.rate = std::min(p.storage_rate, p.cpu_rate);
  p.limit = p.storage_rate < p.cpu_rate ? Bottleneck::kStorage : Bottleneck::kDecode;
  return p;
}

namespace {
std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}
}  // namespace

Recommendation Recommend(const Costs& c) {
  Recommendation r;
  const int cores = std::max(1, c.cores);
  const double required = RequiredRate(c);
  // Headroom: a config sized exactly to the mean rate waits on every hiccup.
  constexpr double kHeadroom = 1.25;

  // Decode threads: enough cores to decode the required rate with headroom,
  // never more than the cores (oversubscribed decoders only preempt each
  // other and the training process). No step given, or a step the cores
  // cannot meet: all of them.
  if (required > 0 && c.decode_s > 0) {
    const int need = static_cast<int>(std::ceil(required * c.decode_s * kHeadroom));
    r.decode_threads = std::clamp(need, 1, cores);
    if (need <= cores) {
      r.notes.push_back(Fmt("decode threads: %.0f samples/s x %.2f ms/sample x 1.25 headroom needs %.0f core(s)",
                            required, c.decode_s * 1e3, std::max(1, need)));
    } else {
      r.notes.push_back(Fmt("decode threads: the step needs %.1f cores of decode; all %.0f are used", need,
                            cores));
    }
  } else {
    r.decode_threads = cores;
    r.notes.push_back(Fmt("decode threads: one per core (%.0f): no step time bounds the rate", cores));
  }
  // The scheduler shares a busy machine per runnable thread: a loader that
  // needs every core but got clearly fewer of them (other processes compete)
  // takes a fairer share with one decoder more than the cores. On an idle
  // machine one extra thread costs little; on a shared one it is the
  // difference between the decoders' share and a neighbour's.
  const bool wants_all = r.decode_threads == cores && (required <= 0 || required * c.decode_s > cores);
  if (wants_all && c.cores_available > 0 && c.cores_available < 0.8 * cores) {
    r.decode_threads = cores + 1;
    r.notes.push_back(Fmt("decode threads: %.0f cores + 1, because the loader got only %.2f of %.0f cores: "
                          "the scheduler shares a busy machine per thread",
                          cores, c.cores_available, cores));
  }

  // Reader concurrency from Little's law at the rate the decoders will take.
  Costs cpu_only = c;
  cpu_only.storage_bytes_per_s = 0, cpu_only.read_latency_s = 0;
  double target = Predict(cpu_only, 1, r.decode_threads).cpu_rate;
  if (required > 0) target = std::min(target, required * kHeadroom);
  if (c.storage_bytes_per_s > 0 && c.sample_bytes > 0) target = std::min(target, c.storage_bytes_per_s / c.sample_bytes);
  const double in_flight = target * c.read_latency_s;
  // Never fewer than two: with one reader, one slow read (or the reader
  // thread preempted on a busy machine) leaves every decoder empty; an idle
  // reader thread costs nothing.
  r.io_depth = std::clamp(static_cast<int>(std::ceil(in_flight * 1.5)), 2, 64);
  r.notes.push_back(Fmt("io depth: %.0f samples/s x %.3f ms read latency = %.2f reads in flight, x1.5", target,
                        c.read_latency_s * 1e3, in_flight));

  // Prefetch: two batches cover ordinary jitter; a storage tail longer than
  // half a step needs more banked. Then the memory budget bounds it.
  r.prefetch_batches = 2;
  const double tail_limit = c.step_s > 0 ? 0.5 * c.step_s : 0.05;
  if (c.read_latency_p99_s > tail_limit) {
    r.prefetch_batches = 4;
    r.notes.push_back(Fmt("prefetch: read p99 %.1f ms exceeds %.1f ms, so 4 batches are banked",
                          c.read_latency_p99_s * 1e3, tail_limit * 1e3));
  } else {
    r.prefetch_batches = 2;
    r.notes.push_back("prefetch: 2 batches absorb ordinary jitter");
  }
  const double per_batch = c.batch_bytes_per_sample * c.batch_size;
  if (c.budget_bytes > 0 && c.batch_bytes_per_sample > 0) {
    while (r.prefetch_batches > 1 && (r.prefetch_batches + 1) * per_batch > double(c.budget_bytes)) {
      --r.prefetch_batches;
    }
    r.batch_fits = (r.prefetch_batches + 1) * per_batch <= double(c.budget_bytes);
    r.max_batch_size =
        static_cast<int>(double(c.budget_bytes) / ((r.prefetch_batches + 1) * c.batch_bytes_per_sample));
    r.notes.push_back(Fmt("batch size: (prefetch + 1) x batch x %.0f bytes/sample <= budget allows %.0f per batch",
                          c.batch_bytes_per_sample, r.max_batch_size));
  }

  r.predicted = Predict(c, r.io_depth, r.decode_threads);
  r.step_met = required > 0 && r.predicted.rate >= required;
  return r;
}

Diagnosis Diagnose(const RunEvidence& run, double required_rate) {
  Diagnosis d;
  const double wall = std::max(run.wall_s, 1e-9);
  const int readers = std::max(1, run.io_depth), decoders = std::max(1, run.decode_threads);
  d.read_utilisation = std::min(1.0, run.read_busy_s / (wall * readers));
  // Busy time is wall time inside the decode call; decoders beyond the cores
  // share them, so the full utilisation is min(decoders, cores) busy.
  d.decode_utilisation = std::min(1.0, run.decode_busy_s / (wall * std::min(decoders, std::max(1, run.cores))));
  d.decoder_starved = std::min(1.0, run.decode_get_wait_s / (wall * decoders));
  d.readers_blocked = std::min(1.0, run.decode_put_wait_s / (wall * readers));
  d.cpu_cores_used = run.cpu_s / wall;
  const double rate = run.Rate();
  if (required_rate > 0 && rate >= required_rate) {
    d.bottleneck = Bottleneck::kNone;
    d.reason = Fmt("input delivers %.0f samples/s, the step needs %.0f", rate, required_rate);
    return d;
  }
  // Evidence in order of strength: decoders waiting for bytes while readers
  // are busy is storage; decoders busy and fed is decode.
  if (d.decoder_starved >= 0.25 && d.read_utilisation >= 0.5) {
    d.bottleneck = Bottleneck::kStorage;
    d.reason = Fmt("decoders waited for reads %.0f%% of their time while readers were %.0f%% busy",
                   d.decoder_starved * 100, d.read_utilisation * 100);
  } else if (d.decode_utilisation >= 0.7) {
    d.bottleneck = Bottleneck::kDecode;
    d.reason = Fmt("decoders were %.0f%% busy and waited for reads only %.0f%% of their time",
                   d.decode_utilisation * 100, d.decoder_starved * 100);
  } else if (d.readers_blocked >= 0.5) {
    // Decoders not busy by the clock, yet readers queue behind them: the
    // decoders are not getting the cores (other processes, oversubscription).
    d.bottleneck = Bottleneck::kDecode;
    d.reason = Fmt("readers waited for decoders %.0f%% of their time; the process got %.1f cores",
                   d.readers_blocked * 100, d.cpu_cores_used);
  } else if (d.read_utilisation > d.decode_utilisation) {
    d.bottleneck = Bottleneck::kStorage;
    d.reason = Fmt("readers (%.0f%% busy) were busier than decoders (%.0f%%)", d.read_utilisation * 100,
                   d.decode_utilisation * 100);
  } else {
    d.bottleneck = Bottleneck::kUnknown;
    d.reason = Fmt("no stage was saturated (readers %.0f%%, decoders %.0f%% busy): batch assembly or scheduling",
                   d.read_utilisation * 100, d.decode_utilisation * 100);
  }
  return d;
}

}  // namespace stoker::probes
