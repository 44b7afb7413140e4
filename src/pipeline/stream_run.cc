// pipeline/stream_run.cc — see stream_run.h.
#include "pipeline/stream_run.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "observe/clock.h"
#include "observe/cpu_time.h"
#include "pipeline/memory_budget.h"
#include "pipeline/mix_seed.h"
#include "pipeline/sample_decoder.h"
#include "pipeline/sample_keys.h"
#include "pipeline/shard_indexes.h"
#include "pipeline/slot_decode.h"

namespace stoker {

StreamRun::StreamRun(const StreamDataset* data, std::shared_ptr<BufferPool> pool, StreamMixOrder order,
                     int64_t first_batch, std::unique_ptr<StreamHead> head, std::vector<StreamStart> starts)
    : data_(data),
      pool_(std::move(pool)),
      first_batch_(first_batch),
      order_(std::move(order)),
      position_(static_cast<uint64_t>(first_batch) * static_cast<uint64_t>(data->options.batch_size)),
      next_deliver_(first_batch),
      // Enough queued samples to keep every decoder busy while the producer reads.
      decode_queue_(StreamDecodeQueueCapacity(data->options.batch_size,
                                              std::max(1, data->tune_max[Knob::kDecodeThreads])),
                    data->recorder ? &data->recorder->decode_queue.put_wait_ns : nullptr,
                    data->recorder ? &data->recorder->decode_queue.get_wait_ns : nullptr) {
  // Thread ids and names as the indexed mode's (epoch_run.cc): its reader 0
  // is id 1, and the decoders follow the readers; the one producer reads.
  if (Recorder* rec = data_->recorder) {
    rec->io_depth = 1;
    rec->NameThread(kProducerThread, "reader 0");
  }
  // One dataset is one source of all its shards; a mixture's source s has its own.
  const LoaderOptions& o = data_->options;
  const uint32_t n = order_.num_sources();
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t first = data_->first_shards.empty() ? 0 : data_->first_shards[s];
    const uint32_t end = s + 1 < n ? data_->first_shards[s + 1] : static_cast<uint32_t>(data_->shards.size());
    std::vector<uint32_t> shards(end - first);
    std::iota(shards.begin(), shards.end(), first);
    sources_.push_back(std::make_unique<StreamSource>(
        data_, std::move(shards), StreamSourceSeed(o, s), s < starts.size() ? starts[s] : StreamStart{},
        s == 0 ? std::move(head) : nullptr, &cancel_reads_,
        [this](uint32_t shard, Status st) { return LeaveShard(shard, std::move(st)); }));
  }
  producer_ = std::thread([this] { Produce(); });
  Apply(data_->tuned);
}

void StreamRun::Apply(const TuneSettings& t) {
  const TuneSettings& most = data_->tune_max;
  const int decoders = std::clamp(t[Knob::kDecodeThreads], 1, std::max(1, most[Knob::kDecodeThreads]));
  {
    std::lock_guard lock(mu_);
    active_decoders_ = decoders;
    prefetch_ = std::clamp(t[Knob::kPrefetch], 1, std::max(1, most[Knob::kPrefetch]));
  }
  room_.notify_all();
  if (Recorder* rec = data_->recorder) rec->decode_threads = decoders;
  if (data_->gpu) data_->gpu->SetDecodeThreads(decoders);
  SpawnDecodersUpTo(decoders);
}

void StreamRun::SpawnDecodersUpTo(int n) {
  while (static_cast<int>(decoders_.size()) < n) {
    const int i = static_cast<int>(decoders_.size());
    const uint32_t thread = kProducerThread + 1 + static_cast<uint32_t>(i);
    if (Recorder* rec = data_->recorder) rec->NameThread(thread, "decoder " + std::to_string(i));
    decoders_.emplace_back([this, i, thread] { DecodeLoop(i, thread); });
  }
}

bool StreamRun::AwaitTurn(int i) {
  if (i < active_decoders_.load(std::memory_order_relaxed)) return true;
  std::unique_lock lock(mu_);
  room_.wait(lock, [&] { return cancelled_ || i < active_decoders_.load(std::memory_order_relaxed); });
  return !cancelled_;
}

uint64_t StreamRun::ThreadCpuNs() const {
  uint64_t ns = ThreadCpuTimeNs(const_cast<std::thread&>(producer_));
  for (const std::thread& t : decoders_) ns += ThreadCpuTimeNs(const_cast<std::thread&>(t));
  return ns;
}

StreamRun::~StreamRun() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  ready_.notify_all();
  room_.notify_all();
  cancel_reads_.Cancel();
  decode_queue_.Cancel();
  pool_->Cancel();
  producer_.join();
  for (std::thread& t : decoders_) t.join();
  if (Recorder* rec = data_->recorder) {
    // Every thread has stopped: nothing is in flight any more.
    for (const auto& [index, work] : in_flight_) (work->done ? rec->batches_ready : rec->batches_in_progress)--;
    rec->decodes_in_flight = 0;
    rec->decode_queue_depth = 0;
  }
  in_flight_.clear();  // their buffers back to the pool before it is reset
  pool_->Reset();
}

void StreamRun::Produce() {
  CancelScope cancel_scope(&cancel_reads_);
  const uint64_t bs = static_cast<uint64_t>(data_->options.batch_size);
  const uint64_t first = position_;  // the run's first batch's first sample
  // Each source replays from its pass's start to its draws before the run's
  // first batch: read and shuffled, not decoded.
  replaying_ = true;
  for (uint32_t s = 0; s < sources_.size(); ++s) {
    Result<bool> replayed = sources_[s]->SkipTo(order_.DrawsBefore(s, first));
    if (!replayed.ok()) return Fail(replayed.status());
    if (!*replayed) return;  // cancelled, or a shard left by a refusal (LeaveShard failed the run)
  }
  replaying_ = false;
  while (true) {
    // Not while the run's first batch is filled: its reads are the only ones then.
    const bool read_ahead = position_ >= first + bs;
    const uint32_t source = order_.SourceAt(position_);
    Result<std::optional<StreamSample>> next = sources_[source]->Next(read_ahead);
    if (!next.ok()) return Fail(next.status());
    if (!*next || !Emit(std::move(**next), source)) return;
  }
}

std::optional<std::vector<StreamStart>> StreamRun::StartsAt(uint64_t position) const {
  std::vector<StreamStart> starts;
  for (uint32_t s = 0; s < sources_.size(); ++s) {
    std::optional<StreamStart> known = sources_[s]->PassAt(order_.DrawsBefore(s, position));
    if (!known) return std::nullopt;
    starts.push_back(*known);
  }
  return starts;
}

bool StreamRun::LeaveShard(uint32_t shard, Status st) {
  if (data_->options.on_error != OnError::kSkip) {
    Fail(std::move(st));
    return false;
  }
  // Noted for the batch the next sample goes to, which is not done before
  // that sample is emitted; a replay's (before the run's first batch) was noted
  // by the run that delivered that batch.
  if (replaying_) return true;
  const int64_t batch = static_cast<int64_t>(position_ / static_cast<uint64_t>(data_->options.batch_size));
  std::lock_guard lock(mu_);
  shards_left_[batch].push_back(StreamShardSkip{data_->shards[shard], std::move(st)});
  return true;
}

bool StreamRun::Emit(StreamSample sample, uint32_t source) {
  const int bs = data_->options.batch_size;
  const uint64_t pos = position_++;
  const int64_t b = static_cast<int64_t>(pos / static_cast<uint64_t>(bs));
  const int slot = static_cast<int>(pos % static_cast<uint64_t>(bs));
  if (slot == 0) {
    auto batch = std::make_unique<StreamBatch>();
    batch->index = b;
    batch->Begin(bs, data_->gpu.get());
    batch->pending = bs;
    if (data_->options.include_keys) {
      batch->keys.resize(static_cast<size_t>(bs));
      batch->urls.resize(static_cast<size_t>(bs));
    }
    if (sources_.size() > 1) batch->slot_sources.resize(static_cast<size_t>(bs));
    const uint64_t begin = NowNs();
    {  // the prefetch gate: at most prefetch_ batches begun and not delivered (the pool holds the ceiling's)
      std::unique_lock lock(mu_);
      room_.wait(lock, [&] { return cancelled_ || b - next_deliver_ < prefetch_; });
      if (cancelled_) return false;
    }
    batch->lease = pool_->Acquire();
    if (Recorder* rec = data_->recorder) rec->pool_wait_ns.fetch_add(NowNs() - begin, std::memory_order_relaxed);
    if (!batch->lease) return false;
    filling_ = batch.get();
    std::lock_guard lock(mu_);
    in_flight_[b] = std::move(batch);
    if (Recorder* rec = data_->recorder) rec->batches_in_progress++;
  }
  if (!filling_->slot_sources.empty()) filling_->slot_sources[static_cast<size_t>(slot)] = source;
  if (Recorder* rec = data_->recorder) rec->decode_queue_depth++;
  return decode_queue_.Push(DecodeTask{filling_, slot, pos, std::move(sample)});
}

void StreamRun::Fail(Status st) {
  const int64_t bs = data_->options.batch_size;
  std::lock_guard lock(mu_);
  failed_at_ = std::max(first_batch_, static_cast<int64_t>(position_) / bs);
  failure_ = std::move(st);
  ready_.notify_all();
}

void StreamRun::DecodeLoop(int i, uint32_t thread) {
  const LoaderOptions& o = data_->options;
  SampleDecoder decoder(&data_->layout, data_->upscales.get(), o.sample_map.get());
  while (AwaitTurn(i)) {
    std::optional<DecodeTask> task = decode_queue_.Pop();
    if (!task) break;
    if (Recorder* rec = data_->recorder) rec->decode_queue_depth--;
    StreamSample& s = task->sample;
    StreamBatch* batch = task->batch;
    SampleEntry entry = s.Entry();
    // A mixture's sample reads its fields from its source's members.
    if (!data_->aliases.empty()) entry.aliases = data_->aliases[SourceOfShard(data_->first_shards, s.shard())];
    const std::string& shard = data_->shards[s.shard()];
    // Augmentation seeds follow the sample's place in the rank's stream;
    // __index__ is unique across ranks: the stream position interleaved by rank.
    const SlotSample sample{shard,
                            entry,
                            s.data(),
                            {},
                            MixSeed(o.seed, task->position, static_cast<uint64_t>(o.rank)),
                            static_cast<int64_t>(task->position) * o.world_size + o.rank};
    const int64_t in_epoch = batch->index % data_->epoch_batches;  // the batch spans name
    Status st = DecodeIntoSlot(decoder, *data_, *batch, task->slot, sample, thread, in_epoch);
    std::optional<FailedSlot> failure;
    if (!st.ok()) failure = FailedSlot{task->slot, std::move(st), sample.global, InternalKey(shard, entry)};
    task->sample = {};
    Finish(batch, std::move(failure));
  }
}

void StreamRun::Finish(StreamBatch* batch, std::optional<FailedSlot> failure) {
  if (failure) batch->Fail(std::move(*failure));
  if (batch->CountDown(1)) {
    batch->Ready(data_->device.get());  // its device copy, which overlaps the wait for delivery
    std::lock_guard lock(mu_);
    batch->done = true;
    if (Recorder* rec = data_->recorder) {
      rec->batches_in_progress--;
      rec->batches_ready++;
    }
    ready_.notify_all();
  }
}

Result<std::unique_ptr<StreamBatch>> StreamRun::NextReady(int wait_ms, std::chrono::steady_clock::time_point since) {
  using Clock = std::chrono::steady_clock;
  const int timeout_ms = data_->options.timeout_ms;
  const Clock::time_point poll_end = Clock::now() + std::chrono::milliseconds(wait_ms);
  const Clock::time_point timeout_end = since + std::chrono::milliseconds(timeout_ms);
  std::unique_lock lock(mu_);
  while (true) {
    if (cancelled_) return Cancelled("the stream was stopped");
    auto it = in_flight_.find(next_deliver_);
    if (it != in_flight_.end() && it->second->done) {
      std::unique_ptr<StreamBatch> work = std::move(it->second);
      in_flight_.erase(it);
      if (auto left = shards_left_.find(next_deliver_); left != shards_left_.end()) {
        work->shards_left = std::move(left->second);
        shards_left_.erase(left);
      }
      ++next_deliver_;
      room_.notify_all();  // the producer's prefetch gate
      pool_->RevokeOverflow();
      if (Recorder* rec = data_->recorder) {
        rec->batches_ready--;
        rec->batches_delivered++;
      }
      return work;
    }
    if (failed_at_ >= 0 && next_deliver_ >= failed_at_) return failure_;
    // The caller holds every buffer (list(loader)) and waits for a batch not
    // begun: lend one past capacity rather than wait forever.
    if (it == in_flight_.end() && pool_->free_count() == 0) pool_->GrantOverflow();
    Clock::time_point until = Clock::time_point::max();
    if (wait_ms > 0) until = poll_end;
    if (timeout_ms > 0 && timeout_end < until) until = timeout_end;
    if (until == Clock::time_point::max()) {
      ready_.wait_for(lock, std::chrono::milliseconds(100));  // re-checks the pool's grant
      continue;
    }
    if (ready_.wait_until(lock, std::min(until, Clock::now() + std::chrono::milliseconds(100))) ==
            std::cv_status::timeout &&
        Clock::now() >= until) {
      if (timeout_ms > 0 && Clock::now() >= timeout_end) {
        return DeadlineExceeded("batch " + std::to_string(next_deliver_) + " of the stream not ready after " +
                                std::to_string(timeout_ms) + " ms");
      }
      return std::unique_ptr<StreamBatch>();
    }
  }
}

}  // namespace stoker
