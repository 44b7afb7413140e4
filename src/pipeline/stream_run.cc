// pipeline/stream_run.cc — see stream_run.h.
#include "pipeline/stream_run.h"

#include <cstring>

#include "observe/clock.h"
#include "pipeline/epoch_order.h"
#include "pipeline/sample_decoder.h"
#include "pipeline/sample_keys.h"
#include "pipeline/shuffle_buffer.h"
#include "pipeline/stream_order.h"

namespace stoker {

StreamRun::StreamRun(const StreamDataset* data, std::shared_ptr<BufferPool> pool, int64_t first_batch,
                     std::unique_ptr<StreamHead> head)
    : data_(data),
      pool_(std::move(pool)),
      first_batch_(first_batch),
      head_(std::move(head)),
      next_deliver_(first_batch),
      // Enough queued samples to keep every decoder busy while the producer reads.
      decode_queue_(static_cast<size_t>(std::max(data->options.batch_size, 2 * data->options.decode_threads))) {
  if (Recorder* rec = data_->recorder) {
    rec->io_depth = 1;
    rec->decode_threads = data_->options.decode_threads;
  }
  producer_ = std::thread([this] { Produce(); });
  for (int i = 0; i < data_->options.decode_threads; ++i) decoders_.emplace_back([this] { DecodeLoop(); });
}

StreamRun::~StreamRun() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  ready_.notify_all();
  cancel_reads_.Cancel();
  decode_queue_.Cancel();
  pool_->Cancel();
  producer_.join();
  for (std::thread& t : decoders_) t.join();
  in_flight_.clear();  // their buffers back to the pool before it is reset
  pool_->Reset();
}

void StreamRun::Produce() {
  CancelScope cancel_scope(&cancel_reads_);
  const LoaderOptions& o = data_->options;
  const uint32_t shards = static_cast<uint32_t>(data_->shards.size());
  // The buffer's draws depend on the seed and rank only (each rank its own stream).
  ShuffleBuffer<std::unique_ptr<StreamSample>> buffer(o.shuffle ? static_cast<size_t>(o.shuffle_buffer) : 1,
                                                      MixSeed(o.seed, static_cast<uint64_t>(o.rank), 0x42554646ull));
  for (uint64_t pass = 0;; ++pass) {
    bool any = false;
    for (uint32_t s : StreamPassShards(o.seed, pass, shards, o.rank, o.world_size, o.shuffle)) {
      {
        std::lock_guard lock(mu_);
        if (cancelled_) return;
      }
      std::unique_ptr<ShardStream> stream;
      if (head_ && pass == 0 && head_->first.shard == s) {  // the stream's first shard, its first sample read
        stream = std::move(head_->shard);
        any = true;
        std::optional<std::unique_ptr<StreamSample>> out =
            buffer.Push(std::make_unique<StreamSample>(std::move(head_->first)));
        head_.reset();
        if (out && !Emit(std::move(*out))) return;
      } else {
        Result<std::unique_ptr<ShardStream>> opened = ShardStream::Open(data_->shards[s], s, *o.storage);
        if (!opened.ok()) return Fail(opened.status());
        stream = std::move(opened).value();
      }
      while (true) {
        const uint64_t begin = NowNs();
        Result<std::optional<StreamSample>> next = stream->Next();
        if (!next.ok()) return Fail(next.status());
        if (!*next) break;
        if (Recorder* rec = data_->recorder) rec->read.Add((*next)->bytes.size(), NowNs() - begin);
        any = true;
        std::optional<std::unique_ptr<StreamSample>> out =
            buffer.Push(std::make_unique<StreamSample>(std::move(**next)));
        if (out && !Emit(std::move(*out))) return;
      }
    }
    // The pass's end: what the buffer holds goes out before the next pass's samples come in.
    while (std::optional<std::unique_ptr<StreamSample>> out = buffer.Drain()) {
      if (!Emit(std::move(*out))) return;
    }
    if (!any) {
      return Fail(DataLoss("stream mode: rank " + std::to_string(o.rank) + "'s shards of pass " +
                           std::to_string(pass) + " hold no samples"));
    }
  }
}

bool StreamRun::Emit(std::unique_ptr<StreamSample> sample) {
  const int bs = data_->options.batch_size;
  const uint64_t pos = position_++;
  const int64_t b = static_cast<int64_t>(pos / static_cast<uint64_t>(bs));
  const int slot = static_cast<int>(pos % static_cast<uint64_t>(bs));
  if (b < first_batch_) return true;  // replayed to get here: not decoded
  if (slot == 0) {
    auto batch = std::make_unique<StreamBatch>();
    batch->number = b;
    batch->pending = bs;
    if (data_->options.include_keys) {
      batch->keys.resize(static_cast<size_t>(bs));
      batch->urls.resize(static_cast<size_t>(bs));
    }
    const uint64_t begin = NowNs();
    batch->lease = pool_->Acquire();  // the pool's capacity bounds the batches ahead
    if (Recorder* rec = data_->recorder) rec->pool_wait_ns.fetch_add(NowNs() - begin, std::memory_order_relaxed);
    if (!batch->lease) return false;
    filling_ = batch.get();
    std::lock_guard lock(mu_);
    in_flight_[b] = std::move(batch);
  }
  return decode_queue_.Push(DecodeTask{filling_, slot, pos, std::move(sample)});
}

void StreamRun::Fail(Status st) {
  const int64_t bs = data_->options.batch_size;
  std::lock_guard lock(mu_);
  failed_at_ = std::max(first_batch_, static_cast<int64_t>(position_) / bs);
  failure_ = std::move(st);
  ready_.notify_all();
}

void StreamRun::DecodeLoop() {
  const LoaderOptions& o = data_->options;
  const BatchLayout& layout = data_->layout;
  SampleDecoder decoder(&layout);
  while (std::optional<DecodeTask> task = decode_queue_.Pop()) {
    StreamSample& s = *task->sample;
    uint8_t* base = task->batch->lease->data();
    const std::string& shard = data_->shards[s.shard];
    // Augmentation seeds follow the sample's place in the rank's stream.
    const uint64_t seed = MixSeed(o.seed, task->position, static_cast<uint64_t>(o.rank));
    const uint64_t begin = NowNs();
    Status st = decoder.Decode(shard, s.entry, s.bytes, base, task->slot, seed);
    if (Recorder* rec = data_->recorder) rec->decode.Add(s.bytes.size(), NowNs() - begin);
    // Unique across ranks: the stream position interleaved by rank.
    const int64_t global = static_cast<int64_t>(task->position) * o.world_size + o.rank;
    const ArraySlot& index = layout.arrays[layout.index_array];
    std::memcpy(base + index.offset + index.sample_bytes * static_cast<size_t>(task->slot), &global, sizeof(global));
    if (!task->batch->keys.empty()) {
      Result<std::string> key = UserKey(o, shard, s.entry, s.bytes);
      if (key.ok()) {
        task->batch->keys[static_cast<size_t>(task->slot)] = std::move(key.value());
      } else if (st.ok()) {
        st = key.status();
      }
      task->batch->urls[static_cast<size_t>(task->slot)] = shard;
    }
    task->sample.reset();
    Finish(task->batch, task->slot, std::move(st));
  }
}

void StreamRun::Finish(StreamBatch* batch, int slot, Status st) {
  if (!st.ok()) {
    std::lock_guard lock(batch->error_mu);
    if (batch->error_slot < 0 || slot < batch->error_slot) {
      batch->error_slot = slot;
      batch->error = std::move(st);
    }
  }
  if (batch->pending.fetch_sub(1) == 1) {
    std::lock_guard lock(mu_);
    batch->done = true;
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
      ++next_deliver_;
      pool_->RevokeOverflow();
      if (Recorder* rec = data_->recorder) rec->batches_delivered++;
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
