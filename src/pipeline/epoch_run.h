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
// the batch's lease (a batch counts its lease as one more thing pending).
// Readers pread a run's whole byte range (a lone array sample's data straight
// into its slots: direct_arrays.h); decoders write each field into the
// sample's slot and count the batch down; the last one marks it ready.
// Decoders take the queued sample due first in plan order (DecodeDue), so a
// read that ended late does not leave the batch due next behind later ones.
// NextReady() hands batches out strictly in plan order, so the sample order
// never depends on thread timing.
//
// Epoch boundaries: once the scheduler has queued the last batch of its epoch
// e (or, over remote shards, once the read-ahead window reaches past e's end
// while e is the epoch being delivered, so e + 1's first reads are as early
// as any), it plans e + 1 (the usual next set_epoch) and goes on with e + 1's
// batches into the same pool, so the pool's capacity still bounds every batch
// buffer and the next epoch's first batches are ready when a slow consumer
// gets there. Continue(e + 1) hands them over once every batch of e was
// delivered; any other epoch, or a restore, destroys the run and with it the
// work prepared ahead. Sample order and seeds come from each batch's own plan
// and epoch, so a carried-over batch is the batch a fresh run would make.
// Batches are numbered in one sequence across epochs (each epoch's batch b is
// base + b), so delivery stays strictly in order.
//
// Teardown (the destructor) runs in this order: mark cancelled, cancel the
// reads (io/cancel.h: a remote read in a retry back-off or on a stalled
// server gives up instead of finishing its retries), both queues, the
// throttle and the pool (every wait wakes), join every thread, then reset
// the pool. So a run is dropped promptly over any storage, and work prepared
// ahead (early start, the next epoch) costs nothing when it is not wanted.
// The decode queue is declared after the spare list, so run buffers its tasks
// still share return to a list that still exists.
// Buffers still held by the caller return to the pool whenever they are released.
//
// Tuning (pipeline/autotune.h): Apply moves reads in flight, decode threads,
// read-ahead and prefetch while the run goes on. Threads are started up to
// the number in effect (never past Dataset::tune_max); a reader or decoder
// whose number is at or past the count in effect parks between tasks (on
// tuned_) holding no buffer, and wakes when the count rises again or the run
// is torn down. Prefetch is a gate in front of the pool (batches leased and
// not yet delivered stay at most prefetch); the pool is sized for the
// largest prefetch. Only how much runs at once changes: which samples, their
// order and their bytes come from the plan and the seeds.
// Thread-safety: NextReady, Apply and ThreadCpuNs from one consumer thread;
// the rest is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "core/bounded_queue.h"
#include "core/ordered_queue.h"
#include "core/buffer_pool.h"
#include "core/page_allocator.h"
#include "core/rate_limiter.h"
#include "io/cancel.h"
#include "io/reader.h"
#include "observe/recorder.h"
#include "pipeline/autotune.h"
#include "pipeline/batch_in_flight.h"
#include "pipeline/dataset.h"
#include "pipeline/direct_arrays.h"
#include "pipeline/planner.h"
#include "pipeline/shard_files.h"
#include "formats/sample_index.h"
#include "stoker/loader.h"

namespace stoker {

struct DecodeTask;

// A batch being made (batch_in_flight.h), with what the indexed run adds:
// the plan and epoch its samples follow, and decode tasks read ahead of its
// buffer.
struct BatchWork : BatchInFlight {
  uint64_t epoch = 0;     // whose plan and seeds it follows
  const EpochPlan* plan = nullptr;  // that epoch's; owned by the run or the loader, outlives the batch's tasks
  bool leased = false;  // guarded by EpochRun::mu_: has its buffer (lease set)
  // Read ahead of its buffer (remote shards): decode tasks whose bytes arrived
  // before the lease wait here; the scheduler queues them once it sets the
  // lease. lease is written once under park_mu; readers test it under park_mu.
  std::mutex park_mu;
  std::vector<DecodeTask> parked;  // guarded by park_mu
};

struct ReadTask {
  BatchWork* batch;
  int slot;
  SampleRef ref;
  // Slots [slot, slot + count), plan positions in order from ref. Token runs:
  // windows copied by one task; sample runs: one read of their byte range
  // (pipeline/read_runs.h), then one decode task per sample.
  int count = 1;
  // Set where the samples' slots are not consecutive (a mixture's batch,
  // read_runs.h ScatteredRuns): the slot of each, slots[0] == slot, their
  // samples in file order.
  std::vector<int> slots = {};  // an initializer: ReadTask{batch, slot, ref, count} leaves it empty, unwarned
  int SlotAt(int k) const { return slots.empty() ? slot + k : slots[static_cast<size_t>(k)]; }
};

// A sample's staging buffer, with the array ranges the reader placed straight
// into their slots instead (pipeline/direct_arrays.h). Its bytes map their
// pages directly (see core/page_allocator.h): freed at an epoch's end, they go
// back to the kernel instead of lingering in arenas.
struct ReadBuffer {
  std::vector<uint8_t, PageAllocator<uint8_t>> bytes;
  std::vector<DirectRange> direct;
  std::vector<RandomAccessReader::Detour> detours;  // the read's, kept for reuse
  // Parquet rows (formats/parquet_file.h): each row's members, as laid out
  // in bytes by the read, since a row has no byte range in its file.
  std::vector<SampleEntry> entries;
};
using Bytes = std::unique_ptr<ReadBuffer>;

// One sample to decode: its bytes are a part of the run its read fetched; the
// run's buffer goes back to the spare list when its last sample is decoded.
struct DecodeTask {
  ReadTask read;  // count 1
  // Samples of one run own disjoint parts of it: a decode may restore its own
  // part (RestoreDirect) while another sample of the run decodes.
  std::shared_ptr<Bytes::element_type> run;
  std::span<uint8_t> bytes;  // inside run->bytes; run->direct holds a lone sample's direct ranges
  // Set for a Parquet row: its members, in run->entries (else the shard index's entry).
  const SampleEntry* entry = nullptr;
  // The shard's index, held while the sample's view of it is in use.
  std::shared_ptr<const ShardIndex> index;
};

// Decode order: the plan's (epoch, batch, slot), so the batch due next is
// decoded first whatever order its reads ended in (core/ordered_queue.h).
struct DecodeDue {
  bool operator()(const DecodeTask& a, const DecodeTask& b) const {
    const BatchWork& x = *a.read.batch;
    const BatchWork& y = *b.read.batch;
    if (x.epoch != y.epoch) return x.epoch < y.epoch;
    if (x.index != y.index) return x.index < y.index;
    return a.read.slot < b.read.slot;
  }
};

class SampleDecoder;

class EpochRun {
 public:
  // Plans another epoch (the loader's planner, called on the scheduler thread).
  using PlanMaker = std::function<Result<EpochPlan>(uint64_t epoch)>;

  // Starts the threads at once; delivery begins with `first_batch` of `plan`.
  // With `next_epoch` set, each epoch's end carries on into the next (above).
  EpochRun(const Dataset* data, ShardFiles* files, std::shared_ptr<BufferPool> pool,
           std::shared_ptr<const EpochPlan> plan, uint64_t epoch, int64_t first_batch, PlanMaker next_epoch = {});
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

  // Once every batch of the current epoch was delivered: makes `epoch`, if it
  // is the one prepared ahead, the current one, delivered from its batch 0,
  // and returns its plan. nullptr (nothing changed) for any other epoch, an
  // undelivered batch, no planner, or a plan that failed: the caller then
  // replaces the run. Waits only for the scheduler to finish planning, which
  // it does right after queuing the current epoch's last batch.
  std::shared_ptr<const EpochPlan> Continue(uint64_t epoch);
  // True while the run delivers `epoch` from its batch 0 and has delivered none.
  bool AtStartOf(uint64_t epoch);

  // Puts new settings in effect now (each within Dataset::tune_max): starts
  // readers or decoders up to the new counts, wakes parked ones, or lets
  // those past the counts park after their current task.
  void Apply(const TuneSettings& settings);
  // CPU time the run's threads have used so far (the controller subtracts
  // it from the process's to see what the training step uses).
  uint64_t ThreadCpuNs() const;

 private:
  // The epoch being delivered (front) and the one prepared ahead, if any; the
  // scheduler appends, Continue drops the front. Batch b of a leg is number
  // leg.base + b in the run's one sequence.
  struct Leg {
    std::shared_ptr<const EpochPlan> plan;
    uint64_t epoch = 0;
    int64_t base = 0;
  };
  // The next epoch when the read-ahead of the one being scheduled reached
  // into it: its leg (published in legs_) and how many of its first batches
  // have their reads queued. Scheduler thread only.
  struct Ahead {
    std::optional<Leg> leg;
    int64_t begun = 0;
    bool failed = false;  // its planning failed: not tried again early
  };
  void Schedule(int64_t first_batch);
  // Queues one epoch's batches from `first`; false once cancelled (or, with
  // ahead->failed, once the next epoch cannot be planned).
  bool ScheduleLeg(const Leg& leg, int64_t first, Ahead* ahead);
  // How many batches past the next one due may be begun (buffered or read
  // ahead) now, before prefetch and read-ahead bound them. Remote shards: the
  // run's first batch goes alone, so its requests are its own (issue 31: a
  // first batch of a few shards costs those shards' requests, not the next
  // eight batches'); once it is delivered, no bound. Doubling the reach with
  // each batch delivered instead cost HTTP +100 ms a fifth of its first
  // second's rate. Local shards: no bound. Needs mu_.
  int64_t RampLocked() const;
  // Plans the epoch after `leg` and publishes it in legs_; false if
  // cancelled or the plan failed (then ahead->failed).
  bool PlanAfter(const Leg& leg, Ahead* ahead);
  // Publishes the leg's batch b and queues its reads; lease null: read ahead
  // of its buffer (the scheduler sets it later). False once cancelled.
  bool Begin(const Leg& leg, int64_t b, std::unique_ptr<BufferPool::Lease> lease);
  // How many of plan positions [first, first + n) one read task takes.
  int SampleRun(const EpochPlan& plan, int64_t first, int n);
  // Reader i runs while i < active_readers_ (decoder i: active_decoders_);
  // false once cancelled.
  bool AwaitTurn(int i, const std::atomic<int>& active);
  void SpawnUpTo(int readers, int decoders);
  void ReadLoop(uint32_t thread);
  // Decodes one read sample into its slot and counts it done.
  void DecodeOne(SampleDecoder& decoder, DecodeTask& task, uint32_t thread);
  void DecodeLoop(uint32_t thread);
  void ReadTokens(const ReadTask& task, uint32_t thread);
  // A run of rows of one Parquet file (`index`, held from the start): their
  // values into one buffer, then their decode tasks, as ReadLoop does for a
  // byte range. False once cancelled.
  bool ReadParquetRows(const ReadTask& task, const ShardIndex& index, uint32_t thread);
  // Reads one run (read_runs.h) and hands its samples to the decoders; false once cancelled.
  bool ReadRun(const ReadTask& run, const std::shared_ptr<const ShardIndex>& index, SampleDecoder* inline_decoder,
               uint32_t thread);
  // Hands a run's decode tasks on: parked on a batch without its buffer yet,
  // decoded here (arrays_only_) or queued. False once cancelled.
  bool Dispatch(BatchWork* batch, std::vector<DecodeTask>& decodes, SampleDecoder* inline_decoder, uint32_t thread);
  // Counts a sample done (with its error, if any); the last one readies the batch.
  void Finish(const ReadTask& task, Status st);
  // Read buffers are bounded by the queues (io_depth readers, the decode
  // queue, the decoders), so the spare list never exceeds that many.
  // A run shared by several decode tasks returns through Share's deleter.
  Bytes TakeBuffer();
  void GiveBuffer(Bytes b);
  std::shared_ptr<ReadBuffer> Share(Bytes b);
  Status TimeoutError(int64_t batch, int timeout_ms, int missing) const;  // REQUIRES mu_

  const Dataset* data_;
  ShardFiles* files_;
  std::shared_ptr<BufferPool> pool_;
  const PlanMaker next_epoch_;
  const int64_t first_batch_;  // of the first leg
  Recorder* const rec_;  // may be null
  RateLimiter throttle_;
  // The readers' remote reads obey it (each reader installs it); the
  // destructor cancels it first.
  Cancellation cancel_reads_;
  // Batches whose reads are queued before their buffers exist (remote
  // shards; read_runs.h); 0 for local files. Apply moves it (never to 0
  // when reads_ahead_, never from 0 when not).
  std::atomic<int64_t> read_ahead_{0};
  bool reads_ahead_ = false;  // set before the threads start
  // A mixture's batches are read by shard and sample, not by slot (read_runs.h ScatteredRuns).
  bool scatter_reads_ = false;  // set before the threads start
  // Counts in effect (Apply); threads at or past them park.
  std::atomic<int> active_readers_{0}, active_decoders_{0};
  std::atomic<int> prefetch_{0};
  int max_readers_ = 0;  // thread ids: readers 1..max_readers_, decoders after
  // Batches of the next leg whose reads ScheduleLeg queued ahead (Ahead::begun),
  // for the ScheduleLeg call of that leg. Scheduler thread only.
  int64_t first_ahead_ = 0;
  // Every field is an array (npy/npz) and no read runs ahead of its buffer:
  // once read straight into its slots a sample needs only its headers
  // checked, so readers decode it themselves rather than hand it to a decoder
  // thread (a queue hop and a wake-up per sample cost more than the check).
  // Set before the threads start.
  bool arrays_only_ = false;

  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable tuned_;  // with mu_: parked threads wait for Apply or teardown
  std::map<int64_t, std::unique_ptr<BatchWork>> in_flight_;  // guarded by mu_
  int64_t next_deliver_;                                      // guarded by mu_
  bool cancelled_ = false;                                    // guarded by mu_
  bool scheduler_blocked_ = false;                            // guarded by mu_
  int64_t granted_for_ = -1;                                  // guarded by mu_
  std::vector<Leg> legs_;     // guarded by mu_; one or two
  bool continued_ = false;    // guarded by mu_: the front is an epoch carried over
  bool scheduler_done_ = false;  // guarded by mu_: the scheduler has returned

  std::mutex buffers_mu_;
  std::vector<Bytes> spare_;  // guarded by buffers_mu_

  // Declared after the state they use; the destructor joins them explicitly.
  BoundedQueue<ReadTask> read_queue_;
  OrderedQueue<DecodeTask, DecodeDue> decode_queue_;
  std::thread scheduler_;
  std::vector<std::thread> readers_;   // grown by Apply (consumer thread), joined by the destructor
  std::vector<std::thread> decoders_;
};


}  // namespace stoker
