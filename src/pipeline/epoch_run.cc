// pipeline/epoch_run.cc — the threads of one epoch; see epoch_run.h.
#include "pipeline/epoch_run.h"

#include <algorithm>
#include <future>
#include <cstring>
#include <limits>

#include "observe/clock.h"
#include "pipeline/memory_budget.h"
#include "observe/cpu_time.h"
#include "pipeline/mix_seed.h"
#include "pipeline/read_runs.h"
#include "pipeline/sample_decoder.h"
#include "pipeline/slot_decode.h"

namespace stoker {

EpochRun::EpochRun(const Dataset* data, ShardFiles* files, std::shared_ptr<BufferPool> pool,
                   std::shared_ptr<const EpochPlan> plan, uint64_t epoch, int64_t first_batch, PlanMaker next_epoch)
    : data_(data),
      files_(files),
      pool_(std::move(pool)),
      next_epoch_(std::move(next_epoch)),
      first_batch_(first_batch),
      rec_(data->recorder),
      throttle_(data->options.max_read_bytes_per_s),
      next_deliver_(first_batch),
      read_queue_(static_cast<size_t>(data->options.batch_size), rec_ ? &rec_->read_queue.put_wait_ns : nullptr,
                  rec_ ? &rec_->read_queue.get_wait_ns : nullptr),
      decode_queue_(DecodeQueueCapacity(data->options, data->parquet_rows != nullptr),
                    rec_ ? &rec_->decode_queue.put_wait_ns : nullptr,
                    rec_ ? &rec_->decode_queue.get_wait_ns : nullptr) {
  const TuneSettings& t = data_->tuned;
  read_ahead_ = data_->tokens ? 0 : t[Knob::kReadAhead];
  reads_ahead_ = read_ahead_ > 0;
  const LoaderOptions& o = data_->options;
  scatter_reads_ = !data_->tokens && !o.mix.names.empty() && o.shuffle && !o.mix.one_source_per_batch;
  // A user's map is a decode stage of its own: it runs on the decoders.
  arrays_only_ = !data_->tokens && !data_->parquet_rows && !reads_ahead_ && !data_->options.sample_map &&
                 std::all_of(data_->layout.fields.begin(), data_->layout.fields.end(), [](const FieldLayout& f) {
                   return f.spec.kind == FieldKind::kNpy || f.spec.kind == FieldKind::kNpz;
                 });
  // Arrays only: readers decode inline (see arrays_only_), so they take the
  // decode threads' share too and no decoder runs.
  const TuneSettings& most = data_->tune_max;
  max_readers_ = arrays_only_ ? std::max({1, most[Knob::kIoDepth], most[Knob::kDecodeThreads]})
                              : std::max(1, most[Knob::kIoDepth]);
  if (rec_) rec_->NameThread(0, "scheduler");
  legs_.push_back({std::move(plan), epoch, 0});
  Apply(t);  // the counts in effect, and the first readers and decoders
  scheduler_ = std::thread([this, first_batch] { Schedule(first_batch); });
}

void EpochRun::Apply(const TuneSettings& t) {
  const TuneSettings& most = data_->tune_max;
  const int io = std::clamp(t[Knob::kIoDepth], 1, std::max(1, most[Knob::kIoDepth]));
  const int dec = std::clamp(t[Knob::kDecodeThreads], 1, std::max(1, most[Knob::kDecodeThreads]));
  const int readers = arrays_only_ ? std::max(io, dec) : io;
  const int decoders = data_->tokens || arrays_only_ ? 0 : dec;
  if (reads_ahead_) read_ahead_ = std::clamp<int64_t>(t[Knob::kReadAhead], 1, std::max(1, most[Knob::kReadAhead]));
  {
    std::lock_guard lock(mu_);
    active_readers_ = readers;
    active_decoders_ = decoders;
    prefetch_ = std::clamp(t[Knob::kPrefetch], 1, std::max(1, most[Knob::kPrefetch]));
    tuned_.notify_all();
    ready_.notify_all();  // the scheduler's prefetch gate
  }
  if (data_->parquet_rows) data_->parquet_rows->SetMaxGroups(ParquetGroupsKept(io, data_->options.shuffle_mix));
  if (rec_) {
    rec_->io_depth = readers;
    rec_->decode_threads = decoders;
  }
  if (data_->gpu) data_->gpu->SetDecodeThreads(decoders);
  SpawnUpTo(readers, decoders);
}

void EpochRun::SpawnUpTo(int readers, int decoders) {
  while (static_cast<int>(readers_.size()) < readers) {
    const int i = static_cast<int>(readers_.size());
    if (rec_) rec_->NameThread(1 + i, "reader " + std::to_string(i));
    readers_.emplace_back([this, i] { ReadLoop(1 + i); });
  }
  while (static_cast<int>(decoders_.size()) < decoders) {
    const int i = static_cast<int>(decoders_.size());
    if (rec_) rec_->NameThread(1 + max_readers_ + i, "decoder " + std::to_string(i));
    decoders_.emplace_back([this, i] { DecodeLoop(1 + max_readers_ + i); });
  }
}

bool EpochRun::AwaitTurn(int i, const std::atomic<int>& active) {
  if (i < active.load(std::memory_order_relaxed)) return true;
  std::unique_lock lock(mu_);
  tuned_.wait(lock, [&] { return cancelled_ || i < active.load(std::memory_order_relaxed); });
  return !cancelled_;
}

uint64_t EpochRun::ThreadCpuNs() const {
  uint64_t ns = ThreadCpuTimeNs(const_cast<std::thread&>(scheduler_));
  for (const std::thread& t : readers_) ns += ThreadCpuTimeNs(const_cast<std::thread&>(t));
  for (const std::thread& t : decoders_) ns += ThreadCpuTimeNs(const_cast<std::thread&>(t));
  return ns;
}

EpochRun::~EpochRun() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    ready_.notify_all();
    tuned_.notify_all();
  }
  cancel_reads_.Cancel();
  read_queue_.Cancel();
  decode_queue_.Cancel();
  throttle_.Cancel();
  pool_->Cancel();
  scheduler_.join();
  for (auto& t : readers_) t.join();
  for (auto& t : decoders_) t.join();
  pool_->Reset();
  // Parked runs share buffers whose deleter returns them to spare_, which is
  // destroyed before in_flight_: let them go while it still exists.
  for (auto& [index, work] : in_flight_) work->parked.clear();
  if (rec_) {
    // Every thread has stopped: nothing is in flight any more.
    for (const auto& [index, work] : in_flight_) (work->done ? rec_->batches_ready : rec_->batches_in_progress)--;
    rec_->reads_in_flight = 0;
    rec_->decodes_in_flight = 0;
    rec_->decode_queue_depth = 0;
  }
  // in_flight_ destroys its BatchWork here: their leases go back to the pool.
}

Result<std::unique_ptr<BatchWork>> EpochRun::NextReady(int wait_ms, std::chrono::steady_clock::time_point since) {
  const auto poll_begin = std::chrono::steady_clock::now();
  const auto begin = since == std::chrono::steady_clock::time_point::min() ? poll_begin : since;
  const int timeout_ms = data_->options.timeout_ms;
  std::unique_lock lock(mu_);
  while (true) {
    auto it = in_flight_.find(next_deliver_);
    if (it != in_flight_.end() && it->second->done) {
      std::unique_ptr<BatchWork> work = std::move(it->second);
      in_flight_.erase(it);
      ++next_deliver_;
      ready_.notify_all();  // the scheduler's prefetch gate may open
      if (rec_) {
        rec_->batches_ready--;
        rec_->batches_delivered++;
      }
      return work;
    }
    if (cancelled_) return Cancelled("the loader was shut down");
    if (wait_ms > 0 && std::chrono::steady_clock::now() - poll_begin >= std::chrono::milliseconds(wait_ms)) {
      return std::unique_ptr<BatchWork>();
    }
    if (timeout_ms > 0 && std::chrono::steady_clock::now() - begin > std::chrono::milliseconds(timeout_ms)) {
      return TimeoutError(next_deliver_ - legs_.front().base, timeout_ms,
                          it == in_flight_.end() ? -1 : it->second->pending.load());
    }
    // The caller holds every buffer and waits for a batch not yet begun:
    // lend one past capacity rather than wait forever.
    if (scheduler_blocked_ && (it == in_flight_.end() || !it->second->leased) && granted_for_ != next_deliver_) {
      granted_for_ = next_deliver_;
      pool_->GrantOverflow();
    }
    ready_.wait_for(lock, std::chrono::milliseconds(wait_ms > 0 ? std::min(50, wait_ms) : 50));
  }
}

Status EpochRun::TimeoutError(int64_t batch, int timeout_ms, int missing) const {
  std::string what = missing < 0 ? "not begun (no free batch buffer)"
                                  : std::to_string(missing) + " of its samples still missing";
  std::string where;
  if (rec_) {
    where = "; now " + std::to_string(rec_->reads_in_flight.load()) + " reads and " +
            std::to_string(rec_->decodes_in_flight.load()) + " decodes in flight";
  }
  return DeadlineExceeded("batch " + std::to_string(batch) + " not ready after " + std::to_string(timeout_ms) +
                          " ms: " + what + where + " (storage hung? raise timeout_ms if this is expected)");
}

std::shared_ptr<const EpochPlan> EpochRun::Continue(uint64_t epoch) {
  std::unique_lock lock(mu_);
  if (!next_epoch_) return nullptr;
  const Leg& cur = legs_.front();
  if (epoch != cur.epoch + 1 || next_deliver_ != cur.base + cur.plan->info.batches) return nullptr;
  // Every batch of this epoch was delivered, so all were queued: the scheduler
  // is planning the next epoch, has published it, or has stopped.
  ready_.wait(lock, [&] { return cancelled_ || scheduler_done_ || legs_.size() > 1; });
  if (cancelled_ || legs_.size() < 2) return nullptr;
  // The epoch delivered in full is forgotten (its plan with it): a run kept
  // for many epochs holds two plans at most.
  legs_.erase(legs_.begin());
  continued_ = true;
  if (rec_) rec_->batches_carried.fetch_add(in_flight_.size(), std::memory_order_relaxed);
  ready_.notify_all();  // the scheduler may plan the epoch after
  return legs_.front().plan;
}

bool EpochRun::AtStartOf(uint64_t epoch) {
  std::lock_guard lock(mu_);
  const Leg& cur = legs_.front();
  return !cancelled_ && cur.epoch == epoch && next_deliver_ == cur.base && (continued_ || first_batch_ == 0);
}

void EpochRun::Schedule(int64_t first_batch) {
  Leg leg;
  {
    std::lock_guard lock(mu_);
    leg = legs_[0];
  }
  Ahead ahead;  // filled by ScheduleLeg when its read-ahead reaches into the next epoch
  for (int64_t first = first_batch;; first = 0) {
    if (!ScheduleLeg(leg, first, &ahead)) break;
    // An empty epoch has nothing to prepare ahead (and would plan forever).
    if (!next_epoch_ || leg.plan->info.batches == 0) break;
    if (!ahead.leg) {
      {
        // Plan epoch e + 1 only once e is the one delivered: at most one epoch
        // is prepared ahead (its batches are bounded by the pool regardless).
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return cancelled_ || legs_.size() == 1; });
        if (cancelled_) break;
      }
      if (!PlanAfter(leg, &ahead)) break;
    }
    leg = std::move(*ahead.leg);
    first_ahead_ = ahead.begun;  // ScheduleLeg(leg, 0) starts after the reads already queued
    ahead = Ahead{};
  }
  std::lock_guard lock(mu_);
  scheduler_done_ = true;
  ready_.notify_all();
}

bool EpochRun::PlanAfter(const Leg& leg, Ahead* ahead) {
  Result<EpochPlan> next = next_epoch_(leg.epoch + 1);
  if (!next.ok()) {  // Continue declines; the loader plans again and reports the error
    ahead->failed = true;
    return false;
  }
  Leg after{std::make_shared<const EpochPlan>(std::move(next).value()), leg.epoch + 1,
            leg.base + leg.plan->info.batches};
  std::lock_guard lock(mu_);
  if (cancelled_) return false;
  legs_.push_back(after);
  ready_.notify_all();
  ahead->leg = std::move(after);
  return true;
}

int64_t EpochRun::RampLocked() const {
  const int64_t unbounded = std::numeric_limits<int64_t>::max() / 4;
  return reads_ahead_ && next_deliver_ == first_batch_ ? 1 : unbounded;
}

bool EpochRun::ScheduleLeg(const Leg& leg, int64_t first_batch, Ahead* ahead) {
  const int64_t batches = leg.plan->info.batches;
  // Remote shards: the reads of the next read_ahead_ batches are queued
  // before their buffers exist (read_runs.h), so reads in flight are not
  // capped by the prefetch depth; their bytes wait on the batch until it has a buffer.
  // The window runs on into the next epoch (planned here, once this one is
  // the one delivered), so an epoch's first batches are read as early as any
  // other: without it they began only with their buffers, prefetch batches
  // before they were due, and a round trip or two stalled every epoch's start.
  int64_t next_read = first_batch;  // the first batch whose reads are not queued yet
  if (first_batch == 0 && first_ahead_ > 0) next_read = std::min(first_ahead_, batches);
  first_ahead_ = 0;
  for (int64_t b = first_batch; b < batches; ++b) {
    int64_t reach;  // this leg's first batch not to begin yet (RampLocked)
    {
      std::lock_guard lock(mu_);
      reach = next_deliver_ - leg.base + RampLocked();
    }
    for (; read_ahead_ > 0 && next_read < batches && next_read <= b + read_ahead_ && next_read < reach; ++next_read)
      if (!Begin(leg, next_read, nullptr)) return false;
    if (read_ahead_ > 0 && next_read == batches && b + read_ahead_ >= batches && next_epoch_ && !ahead->failed) {
      bool current = false;
      {
        std::lock_guard lock(mu_);
        current = legs_.size() == 1;  // never wait here: this epoch's buffers come first
      }
      if (!ahead->leg && current && !PlanAfter(leg, ahead) && !ahead->failed) return false;
      if (ahead->leg) {
        const int64_t next_batches = ahead->leg->plan->info.batches;
        for (; ahead->begun < next_batches && batches + ahead->begun <= b + read_ahead_ &&
               batches + ahead->begun < reach;
             ++ahead->begun)
          if (!Begin(*ahead->leg, ahead->begun, nullptr)) return false;
      }
    }
    const uint64_t wait_begin = NowNs();
    {
      // Prefetch: at most prefetch_ batches leased and not yet delivered, so
      // with the one the consumer holds, prefetch + 1 buffers, as a pool of
      // that capacity allowed (the pool is sized for the largest prefetch
      // the controller may set). Never blocks the batch the consumer waits
      // for (b == next_deliver_).
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] {
        return cancelled_ || leg.base + b - next_deliver_ < std::min<int64_t>(prefetch_.load(), RampLocked());
      });
      if (cancelled_) return false;
      scheduler_blocked_ = true;
    }
    std::unique_ptr<BufferPool::Lease> lease = pool_->Acquire();
    if (rec_) rec_->pool_wait_ns.fetch_add(NowNs() - wait_begin, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      scheduler_blocked_ = false;
      // The consumer grants under mu_ while this flag is set; a grant made
      // after Acquire had its pooled buffer would otherwise wait in the pool
      // and let the next Acquire pass capacity while the pool's own buffers
      // come back (a `for` loop holds one batch while it asks for the next).
      pool_->RevokeOverflow();
    }
    if (!lease) return false;
    if (next_read == b) {  // no read-ahead: begin it with its buffer, as before
      if (!Begin(leg, b, std::move(lease))) return false;
      next_read = b + 1;
      continue;
    }
    BatchWork* raw;
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return false;
      raw = in_flight_.at(leg.base + b).get();  // held there until its lease is counted below
      raw->leased = true;
    }
    std::vector<DecodeTask> parked;
    {
      std::lock_guard lock(raw->park_mu);
      raw->lease = std::move(lease);
      parked.swap(raw->parked);
    }
    for (DecodeTask& t : parked) {
      if (rec_) rec_->decode_queue_depth++;
      if (!decode_queue_.Push(std::move(t))) return false;
    }
    Finish(ReadTask{raw, 0, {}, 1}, Status::Ok());  // the lease was the last thing it waited for
  }
  return true;
}

int EpochRun::SampleRun(const EpochPlan& plan, int64_t first, int n) {
  const uint32_t shard = plan.At(first).shard;
  const uint64_t limit = CoalesceLimit(data_->options, data_->shards[shard]);
  if (limit == 0 || n <= 1) return 1;
  // Cut by the shard's offsets when they are loaded; else (the reads reach
  // the shard for the first time) the whole stretch in this shard, for the
  // reader to cut once it has loaded them: the scheduler waits on no round
  // trip, and the batches queued after this one keep their turn.
  if (data_->indexes->Held(shard)) return RunLength(plan, *data_->indexes, first, n, limit);
  int count = 1;
  while (count < n && plan.At(first + count).shard == shard) ++count;
  return count;
}

bool EpochRun::Begin(const Leg& leg, int64_t b, std::unique_ptr<BufferPool::Lease> lease) {
  const EpochPlan& plan = *leg.plan;
  const int bs = data_->options.batch_size;
  const int64_t total = plan.info.rank_samples;
  // Token windows from a memory map are small and cheap: one task per run of
  // slots (~256 KiB of output) keeps queue traffic off the per-sample path.
  // From a remote .bin each window is round trips: one task per window, so
  // io_depth readers wait on io_depth windows at once.
  const int run = !data_->tokens || data_->tokens->remote()
                      ? 1
                      : std::max(1, (256 << 10) / (data_->tokens->sample_tokens() * 8));
  auto work = std::make_unique<BatchWork>();
  work->index = b;
  work->epoch = leg.epoch;
  work->plan = &plan;
  // The exact partition gives a rank with fewer samples a short or empty
  // last batch (planner.h, ShareOfRank): an empty one has no reads.
  work->Begin(static_cast<int>(std::clamp<int64_t>(total - b * bs, 0, bs)), data_->gpu.get());
  // Without its buffer the batch also waits for that: one more to count down.
  work->pending = work->size + (lease ? 0 : 1);
  work->keys.resize(data_->options.include_keys ? work->size : 0);
  work->urls.resize(work->keys.size());
  work->leased = lease != nullptr;
  work->lease = std::move(lease);
  BatchWork* raw = work.get();
  // Read before publishing: once its last read is queued the batch may be
  // finished, delivered and freed before the loop tests its bound again
  // (a use-after-free that scripts/sanitize.sh found).
  const int size = work->size;
  const bool empty_with_buffer = size == 0 && work->leased;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return false;
    in_flight_[leg.base + b] = std::move(work);
    if (rec_) rec_->batches_in_progress++;
  }
  if (scatter_reads_) {
    std::vector<SampleRef> refs(static_cast<size_t>(size));
    for (int slot = 0; slot < size; ++slot) refs[static_cast<size_t>(slot)] = plan.At(b * bs + slot);
    auto limit_of = [this](uint32_t shard) { return CoalesceLimit(data_->options, data_->shards[shard]); };
    for (std::vector<int>& slots : ScatteredRuns(refs, *data_->indexes, limit_of)) {
      ReadTask task{raw, slots[0], refs[static_cast<size_t>(slots[0])], static_cast<int>(slots.size())};
      if (slots.size() > 1) task.slots = std::move(slots);
      if (!read_queue_.Push(std::move(task))) return false;
    }
  } else {
    for (int slot = 0; slot < size;) {
      const SampleRef head = plan.At(b * bs + slot);
      const int count = data_->tokens ? std::min(run, size - slot) : SampleRun(plan, b * bs + slot, size - slot);
      if (!read_queue_.Push(ReadTask{raw, slot, head, count})) return false;
      slot += count;
    }
  }
  // An empty batch with its buffer waits for nothing: no read will count it
  // down, so it is ready now (without a buffer, the lease's arrival is its
  // one pending count and finishes it as for any batch).
  if (empty_with_buffer) Finish(ReadTask{raw, 0, {}, 0}, Status::Ok());
  return true;
}

void EpochRun::ReadLoop(uint32_t thread) {
  CancelScope cancel_scope(&cancel_reads_);
  std::unique_ptr<SampleDecoder> inline_decoder;
  if (arrays_only_) inline_decoder = std::make_unique<SampleDecoder>(&data_->layout);
  const int me = static_cast<int>(thread) - 1;
  while (AwaitTurn(me, active_readers_)) {
    std::optional<ReadTask> task = read_queue_.Pop();
    if (!task) break;
    if (data_->tokens) {
      ReadTokens(*task, thread);
      continue;
    }
    const EpochPlan& plan = *task->batch->plan;
    const int64_t batch_first = task->batch->index * data_->options.batch_size;
    auto ref_at = [&](int k) { return plan.At(batch_first + task->SlotAt(k)); };
    // The shard's offsets: loaded here the first time the reads reach it.
    // A remote shard's open (a HEAD) goes out beside that load (a sidecar's
    // GET): the first read of a shard waits for one round trip, not two.
    std::future<void> opened;
    const uint32_t shard = task->ref.shard;
    if (IsRemoteUrl(data_->shards[shard]) && !data_->indexes->Held(shard)) {
      opened = std::async(std::launch::async, [this, shard] {
        CancelScope scope(&cancel_reads_);
        (void)files_->Get(shard);  // cached for the read; a failure is met again, and reported, there
      });
    }
    Result<std::shared_ptr<const ShardIndex>> index = data_->indexes->Get(shard);
    if (opened.valid()) opened.wait();
    if (!index.ok()) {
      for (int k = 0; k < task->count; ++k) {
        const SampleRef ref = ref_at(k);
        Finish(ReadTask{task->batch, task->SlotAt(k), ref, 1},
               index.status().WithContext("sample " + std::to_string(ref.sample) + " of the shard"));
      }
      continue;
    }
    if ((*index)->parquet) {  // each shard read as its kind is: a mixture may put Parquet files beside tar
      if (!ReadParquetRows(*task, **index, thread)) return;
      continue;
    }
    // The task's samples in runs, each one read (pipeline/read_runs.h). A
    // task that Begin cut is one run; one begun before its shard's offsets
    // were loaded holds all its consecutive samples of the shard, cut here.
    const uint64_t limit = CoalesceLimit(data_->options, data_->shards[task->ref.shard]);
    for (int done = 0; done < task->count;) {
      const int left = task->count - done;
      const int n = task->slots.empty()
                        ? RunLength(plan, *data_->indexes, batch_first + task->slot + done, left, limit)
                        : RunLengthOf([&](int k) { return ref_at(done + k); }, *data_->indexes, left, limit);
      ReadTask run{task->batch, task->SlotAt(done), ref_at(done), n};
      if (!task->slots.empty() && n > 1) run.slots.assign(task->slots.begin() + done, task->slots.begin() + done + n);
      if (!ReadRun(run, *index, inline_decoder.get(), thread)) return;
      done += n;
    }
  }
}

bool EpochRun::ReadRun(const ReadTask& run, const std::shared_ptr<const ShardIndex>& index,
                       SampleDecoder* inline_decoder, uint32_t thread) {
  // A run of run.count samples, consecutive in one shard: one read of
  // their whole byte range (pipeline/read_runs.h).
  const BatchLayout& layout = data_->layout;
  const EpochPlan& plan = *run.batch->plan;
  const int64_t batch_first = run.batch->index * data_->options.batch_size;
  auto ref_at = [&](int k) { return k == 0 ? run.ref : plan.At(batch_first + run.SlotAt(k)); };
  const SampleTable& samples = index->samples;
  const uint64_t run_begin = samples[run.ref.sample].begin;
  const uint64_t run_end = samples[ref_at(run.count - 1).sample].end;
  Bytes buf = TakeBuffer();
  // Cleared first: growing a buffer that still holds its last run would
  // copy that run into the new block, touching the pages a detoured range
  // leaves unwritten, so RSS would rise by a sample whenever timing handed
  // a spare buffer a longer run (the memory test's +2 MiB at random epochs).
  buf->bytes.clear();
  buf->bytes.resize(run_end - run_begin);
  buf->direct.clear();
  buf->detours.clear();
  if (run.count == 1 && !reads_ahead_) {
    // A lone sample whose batch has its buffer: array data goes straight
    // to its slots (direct_arrays.h).
    PredictDirect(layout, samples[run.ref.sample], &buf->direct);
    uint8_t* base = run.batch->lease->data();
    for (const DirectRange& r : buf->direct) {
      buf->detours.push_back({r.offset, {layout.arrays[r.array].At(base, run.slot), r.size}});
    }
  }
  const uint64_t begin = NowNs();
  if (rec_) rec_->reads_in_flight++;
  if (!throttle_.Acquire(buf->bytes.size())) return false;  // cancelled
  Result<std::shared_ptr<const RandomAccessReader>> file = files_->Get(run.ref.shard);  // a lease: survives eviction
  Status st = file.ok() ? (*file)->PReadDetoured(run_begin, buf->bytes, buf->detours) : file.status();
  if (rec_) {
    const uint64_t end = NowNs();
    rec_->reads_in_flight--;
    rec_->read.Add(buf->bytes.size(), end - begin);
    rec_->AddSourceRead(run.ref.shard, buf->bytes.size(), end - begin);
    rec_->read_latency.Record(end - begin);
    rec_->AddSpan({SpanKind::kRead, thread, begin, end, run.batch->index, run.slot});
  }
  if (!st.ok()) {
    // Every sample of the run fails with the read's error, each named.
    for (int k = 0; k < run.count; ++k) {
      const SampleRef ref = ref_at(k);
      Finish(ReadTask{run.batch, run.SlotAt(k), ref, 1},
             st.WithContext("sample '" + std::string(samples[ref.sample].key) + "'"));
    }
    GiveBuffer(std::move(buf));
    return true;
  }
  std::shared_ptr<ReadBuffer> bytes = Share(std::move(buf));
  std::vector<DecodeTask> decodes;
  decodes.reserve(static_cast<size_t>(run.count));
  for (int k = 0; k < run.count; ++k) {
    const SampleRef ref = ref_at(k);
    const SampleView entry = samples[ref.sample];
    std::span<uint8_t> part(bytes->bytes.data() + (entry.begin - run_begin), entry.end - entry.begin);
    decodes.push_back(DecodeTask{ReadTask{run.batch, run.SlotAt(k), ref, 1}, bytes, part, nullptr, index});
  }
  bytes.reset();
  return Dispatch(run.batch, decodes, inline_decoder, thread);
}

bool EpochRun::Dispatch(BatchWork* batch, std::vector<DecodeTask>& decodes, SampleDecoder* inline_decoder,
                        uint32_t thread) {
  {
    // Read ahead of its buffer: the scheduler queues these once it has one.
    std::lock_guard lock(batch->park_mu);
    if (!batch->lease) {
      for (DecodeTask& d : decodes) batch->parked.push_back(std::move(d));
      return true;
    }
  }
  for (DecodeTask& d : decodes) {
    if (arrays_only_) {  // never for Parquet rows (ReadParquetRows passes no decoder)
      DecodeOne(*inline_decoder, d, thread);
      continue;
    }
    if (rec_) rec_->decode_queue_depth++;
    if (!decode_queue_.Push(std::move(d))) return false;
  }
  return true;
}

bool EpochRun::ReadParquetRows(const ReadTask& task, const ShardIndex& index, uint32_t thread) {
  // The task's rows, one file's, each read through the decoded row groups
  // (formats/parquet_file.h); a mixture's rows sit in scattered slots.
  const EpochPlan& plan = *task.batch->plan;
  const int64_t batch_first = task.batch->index * data_->options.batch_size;
  auto ref_at = [&](int k) { return k == 0 ? task.ref : plan.At(batch_first + task.SlotAt(k)); };
  Bytes buf = TakeBuffer();
  buf->bytes.clear();
  buf->direct.clear();
  buf->detours.clear();
  buf->entries.assign(static_cast<size_t>(task.count), SampleEntry{});
  std::vector<bool> failed(static_cast<size_t>(task.count), false);
  const uint64_t begin = NowNs();
  if (rec_) rec_->reads_in_flight++;
  Result<std::shared_ptr<const RandomAccessReader>> file = files_->Get(task.ref.shard);  // a lease: survives eviction
  for (int k = 0; k < task.count; ++k) {
    const SampleRef ref = ref_at(k);
    Status st = file.ok() ? data_->parquet_rows->Read(index, **file, ref.sample, &buf->bytes, &buf->entries[k])
                          : file.status();
    if (!st.ok()) {
      failed[k] = true;
      Finish(ReadTask{task.batch, task.SlotAt(k), ref, 1},
             st.WithContext("sample '" + std::string(index.samples[ref.sample].key) + "'"));
    }
  }
  if (rec_) {
    const uint64_t end = NowNs();
    rec_->reads_in_flight--;
    rec_->read.Add(buf->bytes.size(), end - begin);
    rec_->AddSourceRead(task.ref.shard, buf->bytes.size(), end - begin);
    rec_->read_latency.Record(end - begin);
    rec_->AddSpan({SpanKind::kRead, thread, begin, end, task.batch->index, task.slot});
  }
  // Spans taken once every row is in: appending a row may move the buffer.
  std::shared_ptr<ReadBuffer> run = Share(std::move(buf));
  std::vector<DecodeTask> decodes;
  for (int k = 0; k < task.count; ++k) {
    if (failed[k]) continue;
    const SampleEntry& entry = run->entries[k];
    std::span<uint8_t> part(run->bytes.data() + entry.begin, entry.end - entry.begin);
    decodes.push_back(DecodeTask{ReadTask{task.batch, task.SlotAt(k), ref_at(k), 1}, run, part, &entry, nullptr});
  }
  run.reset();
  return Dispatch(task.batch, decodes, nullptr, thread);
}

void EpochRun::DecodeLoop(uint32_t thread) {
  SampleDecoder decoder(&data_->layout, data_->upscales.get(), data_->options.sample_map.get());
  const int me = static_cast<int>(thread) - 1 - max_readers_;
  while (AwaitTurn(me, active_decoders_)) {
    std::optional<DecodeTask> task = decode_queue_.Pop();
    if (!task) break;
    if (rec_) rec_->decode_queue_depth--;
    DecodeOne(decoder, *task, thread);
  }
}

void EpochRun::DecodeOne(SampleDecoder& decoder, DecodeTask& task, uint32_t thread) {
  const SampleRef& ref = task.read.ref;
  BatchWork* batch = task.read.batch;
  const SlotSample sample{data_->shards[ref.shard],
                          task.entry ? task.entry->view() : task.index->samples[ref.sample],
                          task.bytes,
                          task.run->direct,
                          MixSeed(data_->options.seed, batch->epoch, ref.global),
                          static_cast<int64_t>(ref.global)};
  Status st = DecodeIntoSlot(decoder, *data_, *batch, task.read.slot, sample, thread, batch->index);
  task.run.reset();  // the run's last sample returns its buffer
  Finish(task.read, std::move(st));
}

void EpochRun::ReadTokens(const ReadTask& task, uint32_t thread) {
  const TokenSource& tokens = *data_->tokens;
  const BatchLayout& layout = data_->layout;
  uint8_t* base = task.batch->lease->data();
  const ArraySlot& out = layout.arrays[0];
  const ArraySlot& index = layout.arrays[layout.index_array];
  const ArraySlot* dataset = tokens.blended() ? &layout.arrays[1] : nullptr;  // "dataset_id"
  const int bs = data_->options.batch_size;
  const uint64_t begin = NowNs();
  if (rec_) rec_->reads_in_flight++;
  Status st;
  for (int k = 0; k < task.count && st.ok(); ++k) {
    const int slot = task.slot + k;
    const int64_t global = static_cast<int64_t>(task.batch->plan->At(task.batch->index * bs + slot).global);
    // A remote .bin can fail: the run's error names its first sample.
    st = tokens.Fill(global, reinterpret_cast<int64_t*>(out.At(base, slot)));
    if (!st.ok()) st = st.WithContext("token sample " + std::to_string(global));
    std::memcpy(index.At(base, slot), &global, sizeof(global));
    if (dataset) {
      const int64_t id = tokens.DatasetOf(global);
      std::memcpy(dataset->At(base, slot), &id, sizeof(id));
    }
    if (!task.batch->keys.empty()) task.batch->keys[slot] = std::to_string(global);
  }
  if (rec_) {
    const uint64_t end = NowNs();
    rec_->reads_in_flight--;
    rec_->read.Add(out.sample_bytes * static_cast<size_t>(task.count), end - begin);
    rec_->read_latency.Record(end - begin);
    rec_->AddSpan({SpanKind::kRead, thread, begin, end, task.batch->index, task.slot});
  }
  Finish(task, std::move(st));
}

void EpochRun::Finish(const ReadTask& task, Status st) {
  if (!st.ok()) task.batch->Fail({task.slot, std::move(st), -1, ""});
  if (task.batch->CountDown(task.count)) {
    task.batch->Ready(data_->device.get());  // its device copy, which overlaps the wait for delivery
    std::lock_guard lock(mu_);
    task.batch->done = true;
    if (rec_) {
      rec_->batches_in_progress--;
      rec_->batches_ready++;
    }
    ready_.notify_all();
  }
}

Bytes EpochRun::TakeBuffer() {
  std::lock_guard lock(buffers_mu_);
  if (spare_.empty()) return std::make_unique<ReadBuffer>();
  Bytes b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

void EpochRun::GiveBuffer(Bytes b) {
  std::lock_guard lock(buffers_mu_);
  spare_.push_back(std::move(b));
}

std::shared_ptr<ReadBuffer> EpochRun::Share(Bytes b) {
  return std::shared_ptr<ReadBuffer>(b.release(), [this](ReadBuffer* p) { GiveBuffer(Bytes(p)); });
}

}  // namespace stoker
