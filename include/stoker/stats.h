// stoker/stats.h — what a loader's stages did, as plain values
// (Loader::Stats()). The difference of two snapshots describes what happened
// between them; src/observe/recorder.h keeps the counters behind them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stoker {

struct StageSnapshot {
  uint64_t items = 0, bytes = 0;
  double busy_s = 0;
};

// A point-in-time copy of every counter and gauge; plain values.
struct RecorderSnapshot {
  double time_s = 0;                // since the recorder started
  StageSnapshot read, decode;
  StageSnapshot map;  // the user's per-sample function: its samples and busy time (inside decode's)
  std::vector<StageSnapshot> source_reads;  // a mixture's reads by source, in source order (else empty)
  double read_queue_put_wait_s = 0, read_queue_get_wait_s = 0;
  double decode_queue_put_wait_s = 0, decode_queue_get_wait_s = 0;
  double pool_wait_s = 0;           // the scheduler waited for a free batch buffer (consumer is slower)
  double consumer_wait_s = 0;       // Next() waited for its batch
  uint64_t batches_delivered = 0;
  uint64_t batches_carried = 0;     // a next epoch's batches begun while the one before ended
  int64_t reads_in_flight = 0;      // preads under way now
  int64_t decodes_in_flight = 0;    // samples being decoded now
  int64_t decode_queue_depth = 0;   // samples read, waiting for a decoder
  int64_t batches_ready = 0;        // complete, waiting for Next()
  int64_t batches_in_progress = 0;  // buffer taken, samples still missing
  int io_depth = 0, decode_threads = 0;
  // CPU: this process's CPU seconds, and the whole machine's busy CPU
  // seconds and online CPUs (observe/machine_cpu.h, refreshed every 20 ms):
  // over a wait, the difference is what other processes took.
  double process_cpu_s = 0, machine_busy_s = 0, machine_read_at_s = 0;
  int machine_cpus = 0, machine_allowed_cpus = 0;  // online, and this process's affinity
  // Seconds this process's threads waited runnable for a CPU (observe/run_delay.h); < 0: unknown.
  double run_delay_s = -1;
  std::vector<uint64_t> read_latency;  // LatencyHistogram buckets
  // Device copies (LoaderOptions::device), counted once each completed:
  // h2d_s is their time on the copy stream, h2d_exposed_s the part the
  // consumer waited for (after it asked for the batch); the rest was hidden
  // behind earlier work. device_buffers: device batch buffers now (and at
  // most); pinned_buffers: batch buffers page-locked.
  uint64_t h2d_copies = 0, h2d_bytes = 0, h2d_untimed = 0;
  double h2d_s = 0, h2d_exposed_s = 0;
  int64_t device_buffers = 0, device_buffers_peak = 0, pinned_buffers = 0;
  uint64_t h2d_overwrites = 0;  // the CPU test engine only: buffers overwritten while their copy was in flight
  // Copies issued, counted as each was: early, on the thread that completed
  // the batch (it overlaps the batch's wait for delivery); at delivery, when
  // the consumer took it (a batch whose failed slots were refilled, a
  // received one, or an early issue that failed).
  uint64_t h2d_early = 0, h2d_at_delivery = 0;
  // GPU decode (ImageSpec::decode, pipeline/gpu_decode.h): the decoder ("" when
  // none runs), the share of each batch's images it is sent now and why,
  // images it decoded, images the CPU decoders decoded meanwhile, and the
  // images sent to the CPU instead, by reason ("progressive", "cmyk",
  // "not_jpeg"..., "decoder_failed": taken, failed by the GPU decoder, done by the CPU).
  std::string gpu_decoder;
  double gpu_share = 0;
  std::string gpu_share_why;
  uint64_t gpu_images = 0, gpu_cpu_images = 0, gpu_cpu_fallbacks = 0;
  std::vector<std::pair<std::string, uint64_t>> gpu_refused;
  // "" while the GPU decoder works; else why it was turned off for the process
  // (device/hardware_batcher.h's watchdog), and every image went to the CPU since.
  std::string gpu_failure;
  uint64_t spans_dropped = 0;
  // Remote storage (HTTP, S3): the process-wide counters every remote reader
  // adds to (several loaders in one process share them).
  uint64_t remote_requests = 0;   // sent, retries included
  uint64_t remote_retries = 0;    // requests repeated after a fault
  uint64_t remote_throttled = 0;  // 429 / 503 answers
  uint64_t remote_failures = 0;   // requests that spent their retry budget
  // Outages: requests retrying now, the seconds with faults and no success
  // (every outage so far, the current one included: a counter), and the
  // last fault ("HTTP 503 (throttled) on GET bytes=0-99 http://h/a.tar").
  int64_t remote_retrying = 0;
  double remote_outage_s = 0;
  std::string remote_last_fault;
  uint64_t cache_hits = 0, cache_misses = 0;  // objects from / into the local cache
  std::vector<uint64_t> remote_latency_ms_log2;  // bucket i: requests that took < 2^i ms (last: the rest)
};

}  // namespace stoker
