// pipeline/epoch_run.h — one epoch's threads and queues.
//
//   scheduler ──ReadTask──▶ read_queue ──▶ readers (io_depth) ──DecodeTask──▶
//   decode_queue ──▶ decoders (decode_threads) ──▶ slot of a pooled batch ──▶ NextReady()
//
// Token runs (Dataset::tokens set) use the same scheduler, pool, read queue
// and ordered delivery; a reader fills a run of slots from the memory map
// (ReadTokens) and there is no decode stage.
//
// The scheduler walks the epoch plan one batch at a time: it takes a buffer
// from the pool (the pool's capacity is the prefetch bound), then queues one
// read per sample, or per run of neighbouring samples (read_runs.h). Over
// remote shards it queues the reads of read_ahead_batches further batches
// before their buffers exist: a reader that finishes a run of such a batch
// parks its decode tasks on it, and the scheduler queues them when it sets
// the batch's lease (a batch counts its lease as one more thing pending). Readers pread a sample's whole byte range; decoders write
// each field into the sample's slot and count the batch down; the last one
// marks it ready. NextReady() hands batches out strictly in plan order, so the
// sample order never depends on thread timing.
//
// Teardown (the destructor) runs in this order: mark cancelled, cancel both
// queues, the throttle and the pool (every wait wakes), join every thread,
// then reset the pool. The decode queue is declared after the spare list, so
// run buffers its tasks still share return to a list that still exists. Buffers still held by the caller return to the pool
// whenever they are released.
// Thread-safety: NextReady from one consumer thread; the rest is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "core/bounded_queue.h"
#include "core/buffer_pool.h"
#include "core/page_allocator.h"
#include "core/rate_limiter.h"
#include "observe/recorder.h"
#include "pipeline/batch_layout.h"
#include "pipeline/planner.h"
#include "pipeline/shard_files.h"
#include "pipeline/token_source.h"
#include "formats/sample_index.h"
#include "stoker/loader.h"

namespace stoker {

struct DecodeTask;

// A batch being made: its buffer, how many samples are still missing, and the
// first error among its samples (lowest slot wins, so the error is deterministic).
struct BatchWork {
  int64_t index = 0;
  int size = 0;
  std::unique_ptr<BufferPool::Lease> lease;
  std::vector<std::string> keys;
  std::atomic<int> pending{0};
  std::mutex error_mu;
  int error_slot = -1;  // guarded by error_mu
  Status error;         // guarded by error_mu
  // Every failed slot with its error, in completion order (on_error=skip
  // sorts them by slot before refilling). Guarded by error_mu.
  std::vector<std::pair<int, Status>> failures;
  bool done = false;    // guarded by EpochRun::mu_
  bool leased = false;  // guarded by EpochRun::mu_: has its buffer (lease set)
  // Read ahead of its buffer (remote shards): decode tasks whose bytes arrived
  // before the lease wait here; the scheduler queues them once it sets the
  // lease. lease is written once under park_mu; readers test it under park_mu.
  std::mutex park_mu;
  std::vector<DecodeTask> parked;  // guarded by park_mu

  void RecordError(int slot, Status st) {
    std::lock_guard lock(error_mu);
    failures.emplace_back(slot, st);
    if (error_slot < 0 || slot < error_slot) {
      error_slot = slot;
      error = std::move(st);
    }
  }
};

struct ReadTask {
  BatchWork* batch;
  int slot;
  SampleRef ref;
  // Slots [slot, slot + count), plan positions in order from ref. Token runs:
  // windows copied by one task; sample runs: one read of their byte range
  // (pipeline/read_runs.h), then one decode task per sample.
  int count = 1;
};

// Read buffers map their pages directly (see core/page_allocator.h): freed at
// an epoch's end, they go back to the kernel instead of lingering in arenas.
using Bytes = std::unique_ptr<std::vector<uint8_t, PageAllocator<uint8_t>>>;

// One sample to decode: its bytes are a part of the run its read fetched; the
// run's buffer goes back to the spare list when its last sample is decoded.
struct DecodeTask {
  ReadTask read;  // count 1
  std::shared_ptr<const Bytes::element_type> run;
  std::span<const uint8_t> bytes;  // inside *run
};

// Everything one epoch's threads share with the loader; read-only for them.
struct Dataset {
  LoaderOptions options;
  Recorder* recorder = nullptr;  // null when record_stats is off; owned by LoaderImpl
  std::vector<std::string> shards;
  std::vector<ShardIndex> indexes;
  BatchLayout layout;
  // Set for a token loader: readers copy each sample's token window from the
  // mmap'd .bin straight into its slot (read and assembly are one copy), so
  // no decoder threads run and tasks cover several slots.
  std::shared_ptr<const TokenSource> tokens;
};

class EpochRun {
 public:
  // Starts the threads at once; delivery begins with `first_batch` of `plan`.
  EpochRun(const Dataset* data, ShardFiles* files, std::shared_ptr<BufferPool> pool, const EpochPlan* plan,
           uint64_t epoch, int64_t first_batch);
  ~EpochRun();
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  // The next batch in plan order, once all its samples are written; nullptr
  // once cancelled. If the caller holds every buffer and waits for a batch not
  // yet begun, the pool lends one past capacity rather than wait forever.
  // Cancelled once torn down; DeadlineExceeded after options.timeout_ms.
  // wait_ms > 0: a null BatchWork once that long passed without the batch
  // (nothing consumed), so a caller can poll for interrupts; `since` is when
  // the caller began waiting for this batch (for timeout_ms across polls).
  Result<std::unique_ptr<BatchWork>> NextReady(
      int wait_ms = 0, std::chrono::steady_clock::time_point since = std::chrono::steady_clock::time_point::min());

 private:
  void Schedule(int64_t first_batch);
  // Publishes batch b and queues its reads; lease null: read ahead of its
  // buffer (the scheduler sets it later). False once cancelled.
  bool Begin(int64_t b, std::unique_ptr<BufferPool::Lease> lease);
  void ReadLoop(uint32_t thread);
  void DecodeLoop(uint32_t thread);
  void ReadTokens(const ReadTask& task, uint32_t thread);
  // Counts a sample done (with its error, if any); the last one readies the batch.
  void Finish(const ReadTask& task, Status st);
  // Read buffers are bounded by the queues (io_depth readers, the decode
  // queue, the decoders), so the spare list never exceeds that many.
  // A run shared by several decode tasks returns through Share's deleter.
  Bytes TakeBuffer();
  void GiveBuffer(Bytes b);
  std::shared_ptr<const Bytes::element_type> Share(Bytes b);
  Status TimeoutError(int64_t batch, int timeout_ms, int missing) const;  // REQUIRES mu_

  const Dataset* data_;
  ShardFiles* files_;
  std::shared_ptr<BufferPool> pool_;
  const EpochPlan* plan_;
  const uint64_t epoch_;
  Recorder* const rec_;  // may be null
  RateLimiter throttle_;

  std::mutex mu_;
  std::condition_variable ready_;
  std::map<int64_t, std::unique_ptr<BatchWork>> in_flight_;  // guarded by mu_
  int64_t next_deliver_;                                      // guarded by mu_
  bool cancelled_ = false;                                    // guarded by mu_
  bool scheduler_blocked_ = false;                            // guarded by mu_
  int64_t granted_for_ = -1;                                  // guarded by mu_

  std::mutex buffers_mu_;
  std::vector<Bytes> spare_;  // guarded by buffers_mu_

  // Declared after the state they use; the destructor joins them explicitly.
  BoundedQueue<ReadTask> read_queue_;
  BoundedQueue<DecodeTask> decode_queue_;
  std::thread scheduler_;
  std::vector<std::thread> readers_;
  std::vector<std::thread> decoders_;
};


}  // namespace stoker
