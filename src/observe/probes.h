// observe/probes.h — the measurements behind `stoker doctor`, and the rules
// that turn them into a verdict and a configuration.
//
// Two halves:
//  * Probes of the files themselves, POSIX only (no format or codec here):
//    page-cache residency (mmap + mincore), dropping a file's pages
//    (posix_fadvise DONTNEED), sequential and random read bandwidth with a
//    per-read latency histogram. They measure what storage gives, before any
//    loader is involved, so a slow disk is told apart from a slow pipeline.
//  * Pure functions of measured figures: the predicted samples/s of each
//    resource, the bottleneck named from a loader run's stage counters, and
//    the recommended configuration (io depth from Little's law on the read
//    latency, decode threads from the per-sample decode cost, prefetch and
//    the largest batch from a memory budget). Pure, so the rules are unit
//    tested with made-up figures and the doctor only gathers evidence.
//
// Dropping the cache is advice to the kernel: it can refuse (dirty pages it
// could not write back, tmpfs, overlay filesystems). So the doctor never
// assumes a drop worked: it checks residency afterwards and labels figures
// "cold" only when the pages really left.
// Thread-safety: free functions and values; the probes read files with pread
// only and may run concurrently with other readers of the same files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::probes {

// ---- page cache -----------------------------------------------------------

struct Residency {
  uint64_t pages = 0;     // pages of the files
  uint64_t resident = 0;  // of them, in the page cache
  uint64_t bytes = 0;     // file bytes
  double Fraction() const { return pages == 0 ? 1.0 : static_cast<double>(resident) / pages; }
  Residency& operator+=(const Residency& o) {
    pages += o.pages, resident += o.resident, bytes += o.bytes;
    return *this;
  }
};

// Counts the resident pages in a mincore() vector (bit 0 of each byte).
uint64_t CountResident(std::span<const unsigned char> mincore_vector);

// Residency of one file: mmap (PROT_READ, never touched, so nothing is read
// in) and mincore. An empty file is fully resident by convention.
Result<Residency> FileResidency(const std::string& path);
Result<Residency> FilesResidency(const std::vector<std::string>& paths);

// Writes back dirty pages (DONTNEED skips them) and asks the kernel to drop
// the file's pages. OK means the advice was accepted, not that it was taken:
// check FileResidency afterwards.
Status DropFromPageCache(const std::string& path);

// ---- read bandwidth --------------------------------------------------------

struct ReadProbe {
  uint64_t reads = 0;
  uint64_t bytes = 0;
  double seconds = 0;                  // wall time of the whole probe
  std::vector<uint64_t> latency;       // LatencyHistogram buckets, one per read
  double BytesPerSecond() const { return seconds > 0 ? bytes / seconds : 0; }
  double LatencyQuantile(double q) const;  // seconds
};

struct ReadLimits {
  uint64_t max_bytes = 256ull << 20;   // stop after this many bytes...
  double max_seconds = 2.0;            // ...or this long, whichever first
};

// Reads the files front to back in `chunk`-byte preads, file after file.
Result<ReadProbe> SequentialRead(const std::vector<std::string>& paths, size_t chunk, const ReadLimits& limits);

// `read_size`-byte preads in random order over all the files, each
// page-aligned slot of read_size read at most once (so a cold probe never
// re-reads what it has just brought in), with readahead disabled on the
// descriptors (POSIX_FADV_RANDOM) so each read costs what a sample read in
// shuffled order costs. `seed` fixes the order. A probe that runs out of
// slots stops early: reads < limits allow.
Result<ReadProbe> RandomRead(const std::vector<std::string>& paths, size_t read_size, const ReadLimits& limits,
                             uint64_t seed);

// Whole files (open, read, close), in a random order fixed by `seed`, each
// at most once: the per-sample cost of a dataset of loose files.
Result<ReadProbe> WholeFileReads(const std::vector<std::string>& paths, const ReadLimits& limits, uint64_t seed);

// ---- rules -----------------------------------------------------------------

enum class Bottleneck { kNone, kStorage, kDecode, kUnknown };
const char* BottleneckName(Bottleneck b);  // "none", "storage", "decode", "unknown"

// Per-sample costs as measured, and what the training loop needs.
struct Costs {
  int cores = 1;
  double decode_s = 0;              // one sample's decode on one core
  double read_cpu_s = 0;            // CPU of one sample's read from page cache (memcpy in the kernel)
  double sample_bytes = 0;          // on storage, the sample's byte range in its shard
  double batch_bytes_per_sample = 0;// in the batch buffer (all arrays)
  double storage_bytes_per_s = 0;   // bandwidth where the samples will come from
  double read_latency_s = 0;        // mean latency of one sample read there
  double read_latency_p99_s = 0;
  int batch_size = 32;
  double step_s = 0;                // the training step; 0: unknown (maximise throughput)
  uint64_t budget_bytes = 0;        // for batch buffers; 0: unbounded
  // Cores this process actually gets when it asks for all of them (other
  // processes compete on a shared machine); 0: all `cores`.
  double cores_available = 0;
};

// Samples/s each resource could sustain, and the smallest.
struct Prediction {
  double storage_rate = 0;   // storage bandwidth / sample bytes, capped by io_depth / latency
  double cpu_rate = 0;       // decode threads and cores over decode (+ read copy) cost
  double rate = 0;           // min of the two
  Bottleneck limit = Bottleneck::kUnknown;  // which one is the min
};
Prediction Predict(const Costs& costs, int io_depth, int decode_threads);

// Samples/s the step time asks for: batch_size / step_s (0 when no step).
double RequiredRate(const Costs& costs);

struct Recommendation {
  int io_depth = 1;
  int decode_threads = 1;
  int prefetch_batches = 2;
  int max_batch_size = 0;           // largest batch whose buffers fit the budget (0: no budget)
  bool batch_fits = true;           // the requested batch fits the budget at this prefetch
  Prediction predicted;             // at this configuration
  bool step_met = false;            // predicted rate >= required rate
  std::vector<std::string> notes;   // why each number, in a sentence each
};
Recommendation Recommend(const Costs& costs);

// What a loader run showed: the difference of two RecorderSnapshots plus the
// samples the consumer got and the wall time, with the configuration it ran.
struct RunEvidence {
  double wall_s = 0;
  uint64_t samples = 0;
  int io_depth = 1, decode_threads = 1, cores = 1;
  double read_busy_s = 0, decode_busy_s = 0;
  double decode_get_wait_s = 0;     // decoders waited for reads: storage slower
  double decode_put_wait_s = 0;     // readers waited for decoders: decode slower
  double pool_wait_s = 0;           // scheduler waited for buffers: consumer slower
  double consumer_wait_s = 0;       // Next() waited
  double cpu_s = 0;                 // CPU time of the whole process during the run (0: not measured)
  double Rate() const { return wall_s > 0 ? samples / wall_s : 0; }
};

struct Diagnosis {
  Bottleneck bottleneck = Bottleneck::kUnknown;
  double read_utilisation = 0;      // read busy / (wall x readers)
  double decode_utilisation = 0;    // decode busy / (wall x min(decoders, cores))
  double decoder_starved = 0;       // decode queue get wait / (wall x decoders)
  double readers_blocked = 0;       // decode queue put wait / (wall x readers)
  double cpu_cores_used = 0;        // cpu_s / wall: of the cores, how many the process got
  std::string reason;
};
// Names the stage that limits a run. `required_rate` 0 means "no step given":
// the bottleneck is then whichever stage limits throughput.
Diagnosis Diagnose(const RunEvidence& run, double required_rate);

}  // namespace stoker::probes
