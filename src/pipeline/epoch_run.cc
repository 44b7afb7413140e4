// pipeline/epoch_run.cc — the threads of one epoch; see epoch_run.h.
#include "pipeline/epoch_run.h"

#include <algorithm>
#include <cstring>

#include "observe/clock.h"
#include "pipeline/sample_decoder.h"

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
      arrays_only_(!data->tokens && std::all_of(data->layout.fields.begin(), data->layout.fields.end(),
                                                [](const FieldLayout& f) {
                                                  return f.spec.kind == FieldKind::kNpy ||
                                                         f.spec.kind == FieldKind::kNpz;
                                                })),
      next_deliver_(first_batch),
      read_queue_(static_cast<size_t>(data->options.batch_size), rec_ ? &rec_->read_queue.put_wait_ns : nullptr,
                  rec_ ? &rec_->read_queue.get_wait_ns : nullptr),
      decode_queue_(static_cast<size_t>(std::max(2, data->options.io_depth)),
                    rec_ ? &rec_->decode_queue.put_wait_ns : nullptr,
                    rec_ ? &rec_->decode_queue.get_wait_ns : nullptr) {
  const LoaderOptions& o = data_->options;
  const int decode_threads =
      o.decode_threads > 0 ? o.decode_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Arrays only: readers decode inline (see arrays_only_), so they take the
  // decode threads' share too and no decoder runs.
  const int readers = arrays_only_ ? std::max({1, o.io_depth, decode_threads}) : std::max(1, o.io_depth);
  const int decoders = data_->tokens || arrays_only_ ? 0 : decode_threads;
  if (rec_) {
    rec_->io_depth = readers;
    rec_->decode_threads = decoders;
    rec_->NameThread(0, "scheduler");
    for (int i = 0; i < readers; ++i) rec_->NameThread(1 + i, "reader " + std::to_string(i));
    for (int i = 0; i < decoders; ++i) rec_->NameThread(1 + readers + i, "decoder " + std::to_string(i));
  }
  legs_.push_back({std::move(plan), epoch, 0});
  scheduler_ = std::thread([this, first_batch] { Schedule(first_batch); });
  for (int i = 0; i < readers; ++i) readers_.emplace_back([this, i] { ReadLoop(1 + i); });
  for (int i = 0; i < decoders; ++i) decoders_.emplace_back([this, i, readers] { DecodeLoop(1 + readers + i); });
}

EpochRun::~EpochRun() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    ready_.notify_all();
  }
  read_queue_.Cancel();
  decode_queue_.Cancel();
  throttle_.Cancel();
  pool_->Cancel();
  scheduler_.join();
  for (auto& t : readers_) t.join();
  for (auto& t : decoders_) t.join();
  pool_->Reset();
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
    if (scheduler_blocked_ && it == in_flight_.end() && granted_for_ != next_deliver_) {
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
  for (int64_t first = first_batch;; first = 0) {
    if (!ScheduleLeg(leg, first)) break;
    // An empty epoch has nothing to prepare ahead (and would plan forever).
    if (!next_epoch_ || leg.plan->info.batches == 0) break;
    {
      // Plan epoch e + 1 only once e is the one delivered: at most one epoch
      // is prepared ahead (its batches are bounded by the pool regardless).
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] { return cancelled_ || legs_.size() == 1; });
      if (cancelled_) break;
    }
    Result<EpochPlan> next = next_epoch_(leg.epoch + 1);
    if (!next.ok()) break;  // Continue declines; the loader plans again and reports the error
    Leg after{std::make_shared<const EpochPlan>(std::move(next).value()), leg.epoch + 1,
              leg.base + leg.plan->info.batches};
    {
      std::lock_guard lock(mu_);
      if (cancelled_) break;
      legs_.push_back(after);
      ready_.notify_all();
    }
    leg = std::move(after);
  }
  std::lock_guard lock(mu_);
  scheduler_done_ = true;
  ready_.notify_all();
}

bool EpochRun::ScheduleLeg(const Leg& leg, int64_t first_batch) {
  const EpochPlan* plan = leg.plan.get();
  const int bs = data_->options.batch_size;
  const int64_t total = plan->info.rank_samples;
  // Token windows are small and cheap: one task per run of slots (~256 KiB of
  // output) keeps queue traffic off the per-sample path.
  const int run = data_->tokens ? std::max(1, (256 << 10) / (data_->tokens->sample_tokens() * 8)) : 1;
  for (int64_t b = first_batch; b < plan->info.batches; ++b) {
    {
      std::lock_guard lock(mu_);
      scheduler_blocked_ = true;
    }
    const uint64_t wait_begin = NowNs();
    std::unique_ptr<BufferPool::Lease> lease = pool_->Acquire();
    if (rec_) rec_->pool_wait_ns.fetch_add(NowNs() - wait_begin, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu_);
      scheduler_blocked_ = false;
    }
    if (!lease) return false;
    auto work = std::make_unique<BatchWork>();
    work->index = b;
    work->epoch = leg.epoch;
    work->plan = plan;
    work->size = static_cast<int>(std::min<int64_t>(bs, total - b * bs));
    work->pending = work->size;
    work->keys.resize(data_->options.include_keys ? work->size : 0);
    work->lease = std::move(lease);
    BatchWork* raw = work.get();
    // Read before publishing: once its last read is queued the batch may be
    // finished, delivered and freed before the loop tests its bound again
    // (a use-after-free that scripts/sanitize.sh found).
    const int size = work->size;
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return false;
      in_flight_[leg.base + b] = std::move(work);
      if (rec_) rec_->batches_in_progress++;
    }
    for (int slot = 0; slot < size; slot += run) {
      const int count = std::min(run, size - slot);
      if (!read_queue_.Push(ReadTask{raw, slot, plan->At(b * bs + slot), count})) return false;
    }
  }
  return true;
}

void EpochRun::ReadLoop(uint32_t thread) {
  std::unique_ptr<SampleDecoder> inline_decoder;
  if (arrays_only_) inline_decoder = std::make_unique<SampleDecoder>(&data_->layout);
  const BatchLayout& layout = data_->layout;
  while (std::optional<ReadTask> task = read_queue_.Pop()) {
    if (data_->tokens) {
      ReadTokens(*task, thread);
      continue;
    }
    const SampleEntry& entry = data_->indexes[task->ref.shard].samples[task->ref.sample];
    Bytes buf = TakeBuffer();
    buf->bytes.resize(entry.end - entry.begin);
    // Array data goes straight to its slots (direct_arrays.h).
    PredictDirect(layout, entry, &buf->direct);
    buf->detours.clear();
    uint8_t* base = task->batch->lease->data();
    for (const DirectRange& r : buf->direct) {
      const ArraySlot& a = layout.arrays[r.array];
      buf->detours.push_back({r.offset, {base + a.offset + a.sample_bytes * static_cast<size_t>(task->slot), r.size}});
    }
    const uint64_t begin = NowNs();
    if (rec_) rec_->reads_in_flight++;
    if (!throttle_.Acquire(buf->bytes.size())) return;  // cancelled
    Result<std::shared_ptr<const RandomAccessReader>> file = files_->Get(task->ref.shard);  // a lease: survives eviction
    Status st = file.ok() ? (*file)->PReadDetoured(entry.begin, buf->bytes, buf->detours) : file.status();
    if (rec_) {
      const uint64_t end = NowNs();
      rec_->reads_in_flight--;
      rec_->read.Add(buf->bytes.size(), end - begin);
      rec_->read_latency.Record(end - begin);
      rec_->AddSpan({SpanKind::kRead, thread, begin, end, task->batch->index, task->slot});
    }
    if (!st.ok()) {
      Finish(*task, st.WithContext("sample '" + entry.key + "'"));
      GiveBuffer(std::move(buf));
      continue;
    }
    DecodeTask decode{*task, std::move(buf)};
    if (inline_decoder) {
      DecodeOne(*inline_decoder, decode, thread);
      continue;
    }
    if (rec_) rec_->decode_queue_depth++;
    if (!decode_queue_.Push(std::move(decode))) return;
  }
}

void EpochRun::DecodeLoop(uint32_t thread) {
  SampleDecoder decoder(&data_->layout);
  while (std::optional<DecodeTask> task = decode_queue_.Pop()) {
    if (rec_) rec_->decode_queue_depth--;
    DecodeOne(decoder, *task, thread);
  }
}

void EpochRun::DecodeOne(SampleDecoder& decoder, DecodeTask& task, uint32_t thread) {
  const BatchLayout& layout = data_->layout;
  const SampleRef& ref = task.read.ref;
  BatchWork* batch = task.read.batch;
  const int slot = task.read.slot;
  const SampleEntry& entry = data_->indexes[ref.shard].samples[ref.sample];
  uint8_t* base = batch->lease->data();
  const uint64_t seed = MixSeed(data_->options.seed, batch->epoch, ref.global);
  const uint64_t begin = NowNs();
  if (rec_) rec_->decodes_in_flight++;
  Status st = decoder.Decode(data_->shards[ref.shard], entry, task.bytes->bytes, base, slot, seed, task.bytes->direct);
  if (rec_) {
    const uint64_t end = NowNs();
    rec_->decodes_in_flight--;
    rec_->decode.Add(task.bytes->bytes.size(), end - begin);
    rec_->AddSpan({SpanKind::kDecode, thread, begin, end, batch->index, slot});
  }
  int64_t global = static_cast<int64_t>(ref.global);
  const ArraySlot& index = layout.arrays[layout.index_array];
  std::memcpy(base + index.offset + index.sample_bytes * slot, &global, sizeof(global));
  if (!batch->keys.empty()) batch->keys[slot] = data_->shards[ref.shard] + ":" + entry.key;
  GiveBuffer(std::move(task.bytes));
  Finish(task.read, std::move(st));
}

void EpochRun::ReadTokens(const ReadTask& task, uint32_t thread) {
  const TokenSource& tokens = *data_->tokens;
  const BatchLayout& layout = data_->layout;
  uint8_t* base = task.batch->lease->data();
  const ArraySlot& out = layout.arrays[0];
  const ArraySlot& index = layout.arrays[layout.index_array];
  const int bs = data_->options.batch_size;
  const uint64_t begin = NowNs();
  if (rec_) rec_->reads_in_flight++;
  for (int k = 0; k < task.count; ++k) {
    const int slot = task.slot + k;
    const int64_t global = static_cast<int64_t>(task.batch->plan->At(task.batch->index * bs + slot).global);
    tokens.Fill(global, reinterpret_cast<int64_t*>(base + out.offset + out.sample_bytes * slot));
    std::memcpy(base + index.offset + index.sample_bytes * slot, &global, sizeof(global));
    if (!task.batch->keys.empty()) task.batch->keys[slot] = std::to_string(global);
  }
  if (rec_) {
    const uint64_t end = NowNs();
    rec_->reads_in_flight--;
    rec_->read.Add(out.sample_bytes * static_cast<size_t>(task.count), end - begin);
    rec_->read_latency.Record(end - begin);
    rec_->AddSpan({SpanKind::kRead, thread, begin, end, task.batch->index, task.slot});
  }
  Finish(task, Status::Ok());
}

void EpochRun::Finish(const ReadTask& task, Status st) {
  if (!st.ok()) task.batch->RecordError(task.slot, std::move(st));
  if (task.batch->pending.fetch_sub(task.count) == task.count) {
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

}  // namespace stoker
