// pipeline/loader.cc — the Loader: threads, queues and the order of delivery.
//
//   scheduler ──ReadTask──▶ read_queue ──▶ readers (io_depth) ──DecodeTask──▶
//   decode_queue ──▶ decoders (decode_threads) ──▶ slot of a pooled batch ──▶ Next()
//
// The scheduler walks the epoch plan one batch at a time: it takes a buffer
// from the pool (the pool's capacity, prefetch_batches + 1, is the prefetch
// bound: one for the batch the caller holds), then queues one read per sample.
// Readers pread a sample's whole byte range; decoders write each field into
// the sample's slot and count the batch down; the last one marks it ready.
// Next() hands batches out strictly in plan order, so the sample order never
// depends on thread timing.
//
// One EpochRun owns one epoch's threads and queues. SetEpoch/Restore/the
// destructor tear it down in this order: mark cancelled, cancel both queues and
// the pool (every wait wakes), join every thread, then reset the pool. Buffers
// still held by the caller return to the pool whenever they are released.
// Thread-safety: Loader methods from one consumer thread; see loader.h.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/buffer_pool.h"
#include "core/bounded_queue.h"
#include "core/file.h"
#include "core/rate_limiter.h"
#include "pipeline/batch_layout.h"
#include "pipeline/planner.h"
#include "pipeline/sample_decoder.h"
#include "stoker/loader.h"

namespace stoker {

FieldSpec ImageField(std::string field, ImageSpec spec) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kImage;
  f.image = spec;
  return f;
}
FieldSpec NpyField(std::string field) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kNpy;
  return f;
}
FieldSpec NpzField(std::string field) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kNpz;
  return f;
}
FieldSpec ScalarField(std::string field, DType dtype) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kScalar;
  f.dtype = dtype;
  return f;
}
FieldSpec BytesField(std::string field, size_t max_bytes) {
  FieldSpec f;
  f.field = std::move(field);
  f.kind = FieldKind::kBytes;
  f.max_bytes = max_bytes;
  return f;
}

namespace {

// Shards are opened on first read and stay open: one descriptor per shard.
class ShardFiles {
 public:
  explicit ShardFiles(const std::vector<std::string>* paths) : paths_(paths), files_(paths->size()) {}
  Result<const File*> Get(uint32_t shard) {
    std::lock_guard lock(mu_);
    if (!files_[shard]) {
      STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead((*paths_)[shard]));
      files_[shard] = std::make_unique<File>(std::move(f));
    }
    return files_[shard].get();
  }

 private:
  const std::vector<std::string>* paths_;
  std::mutex mu_;
  std::vector<std::unique_ptr<File>> files_;  // guarded by mu_
};

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
  bool done = false;    // guarded by EpochRun::mu_

  void RecordError(int slot, Status st) {
    std::lock_guard lock(error_mu);
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
};

using Bytes = std::unique_ptr<std::vector<uint8_t>>;

struct DecodeTask {
  ReadTask read;
  Bytes bytes;
};

class BatchImpl : public Batch {
 public:
  BatchImpl(std::unique_ptr<BatchWork> work, const BatchLayout& layout) : work_(std::move(work)) {
    for (const ArraySlot& a : layout.arrays) {
      ArrayView v;
      v.name = a.name;
      v.dtype = a.dtype;
      v.shape.push_back(work_->size);
      v.shape.insert(v.shape.end(), a.sample_shape.begin(), a.sample_shape.end());
      v.data = work_->lease->data() + a.offset;
      v.nbytes = a.sample_bytes * static_cast<size_t>(work_->size);
      arrays_.push_back(std::move(v));
    }
  }
  int64_t index() const override { return work_->index; }
  int size() const override { return work_->size; }
  const std::vector<ArrayView>& arrays() const override { return arrays_; }
  const std::vector<std::string>& keys() const override { return work_->keys; }

 private:
  std::unique_ptr<BatchWork> work_;
  std::vector<ArrayView> arrays_;
};

// Everything one epoch's threads share with the loader; read-only for them.
struct Dataset {
  LoaderOptions options;
  Recorder* recorder = nullptr;  // null when record_stats is off; owned by LoaderImpl
  std::vector<std::string> shards;
  std::vector<ShardIndex> indexes;
  BatchLayout layout;
};

class EpochRun {
 public:
  EpochRun(const Dataset* data, ShardFiles* files, std::shared_ptr<BufferPool> pool, const EpochPlan* plan,
           uint64_t epoch, int64_t first_batch)
      : data_(data),
        files_(files),
        pool_(std::move(pool)),
        plan_(plan),
        epoch_(epoch),
        next_deliver_(first_batch),
        rec_(data->recorder),
        throttle_(data->options.max_read_bytes_per_s),
        read_queue_(static_cast<size_t>(data->options.batch_size), rec_ ? &rec_->read_queue.put_wait_ns : nullptr,
                    rec_ ? &rec_->read_queue.get_wait_ns : nullptr),
        decode_queue_(static_cast<size_t>(std::max(2, data->options.io_depth)),
                      rec_ ? &rec_->decode_queue.put_wait_ns : nullptr,
                      rec_ ? &rec_->decode_queue.get_wait_ns : nullptr) {
    const LoaderOptions& o = data_->options;
    const int readers = std::max(1, o.io_depth);
    const int decoders = o.decode_threads > 0 ? o.decode_threads : std::max(1u, std::thread::hardware_concurrency());
    if (rec_) {
      rec_->io_depth = readers;
      rec_->decode_threads = decoders;
      rec_->NameThread(0, "scheduler");
      for (int i = 0; i < readers; ++i) rec_->NameThread(1 + i, "reader " + std::to_string(i));
      for (int i = 0; i < decoders; ++i) rec_->NameThread(1 + readers + i, "decoder " + std::to_string(i));
    }
    scheduler_ = std::thread([this, first_batch] { Schedule(first_batch); });
    for (int i = 0; i < readers; ++i) readers_.emplace_back([this, i] { ReadLoop(1 + i); });
    for (int i = 0; i < decoders; ++i) decoders_.emplace_back([this, i, readers] { DecodeLoop(1 + readers + i); });
  }

  ~EpochRun() {
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

  // The next batch in plan order, once all its samples are written.
  std::unique_ptr<BatchWork> NextReady() {
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
      if (cancelled_) return nullptr;
      // The caller holds every buffer and waits for a batch not yet begun:
      // lend one past capacity rather than wait forever.
      if (scheduler_blocked_ && it == in_flight_.end() && granted_for_ != next_deliver_) {
        granted_for_ = next_deliver_;
        pool_->GrantOverflow();
      }
      ready_.wait_for(lock, std::chrono::milliseconds(50));
    }
  }

 private:
  void Schedule(int64_t first_batch) {
    const int bs = data_->options.batch_size;
    const int64_t total = static_cast<int64_t>(plan_->samples.size());
    for (int64_t b = first_batch; b < plan_->info.batches; ++b) {
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
      if (!lease) return;
      auto work = std::make_unique<BatchWork>();
      work->index = b;
      work->size = static_cast<int>(std::min<int64_t>(bs, total - b * bs));
      work->pending = work->size;
      work->keys.resize(data_->options.include_keys ? work->size : 0);
      work->lease = std::move(lease);
      BatchWork* raw = work.get();
      {
        std::lock_guard lock(mu_);
        if (cancelled_) return;
        in_flight_[b] = std::move(work);
        if (rec_) rec_->batches_in_progress++;
      }
      for (int slot = 0; slot < raw->size; ++slot) {
        if (!read_queue_.Push(ReadTask{raw, slot, plan_->samples[b * bs + slot]})) return;
      }
    }
  }

  void ReadLoop(uint32_t thread) {
    while (std::optional<ReadTask> task = read_queue_.Pop()) {
      const SampleEntry& entry = data_->indexes[task->ref.shard].samples[task->ref.sample];
      Bytes bytes = TakeBuffer();
      bytes->resize(entry.end - entry.begin);
      const uint64_t begin = NowNs();
      if (rec_) rec_->reads_in_flight++;
      if (!throttle_.Acquire(bytes->size())) return;  // cancelled
      Result<const File*> file = files_->Get(task->ref.shard);
      Status st = file.ok() ? (*file)->PRead(entry.begin, *bytes) : file.status();
      if (rec_) {
        const uint64_t end = NowNs();
        rec_->reads_in_flight--;
        rec_->read.Add(bytes->size(), end - begin);
        rec_->read_latency.Record(end - begin);
        rec_->AddSpan({SpanKind::kRead, thread, begin, end, task->batch->index, task->slot});
      }
      if (!st.ok()) {
        Finish(*task, st.WithContext("sample '" + entry.key + "'"));
        GiveBuffer(std::move(bytes));
        continue;
      }
      if (rec_) rec_->decode_queue_depth++;
      if (!decode_queue_.Push(DecodeTask{*task, std::move(bytes)})) return;
    }
  }

  void DecodeLoop(uint32_t thread) {
    SampleDecoder decoder(&data_->layout);
    const BatchLayout& layout = data_->layout;
    while (std::optional<DecodeTask> task = decode_queue_.Pop()) {
      const SampleRef& ref = task->read.ref;
      BatchWork* batch = task->read.batch;
      const int slot = task->read.slot;
      const SampleEntry& entry = data_->indexes[ref.shard].samples[ref.sample];
      uint8_t* base = batch->lease->data();
      const uint64_t seed = MixSeed(data_->options.seed, epoch_, ref.global);
      const uint64_t begin = NowNs();
      if (rec_) {
        rec_->decode_queue_depth--;
        rec_->decodes_in_flight++;
      }
      Status st = decoder.Decode(data_->shards[ref.shard], entry, *task->bytes, base, slot, seed);
      if (rec_) {
        const uint64_t end = NowNs();
        rec_->decodes_in_flight--;
        rec_->decode.Add(task->bytes->size(), end - begin);
        rec_->AddSpan({SpanKind::kDecode, thread, begin, end, batch->index, slot});
      }
      int64_t global = static_cast<int64_t>(ref.global);
      const ArraySlot& index = layout.arrays[layout.index_array];
      std::memcpy(base + index.offset + index.sample_bytes * slot, &global, sizeof(global));
      if (!batch->keys.empty()) batch->keys[slot] = data_->shards[ref.shard] + ":" + entry.key;
      GiveBuffer(std::move(task->bytes));
      Finish(task->read, std::move(st));
    }
  }

  void Finish(const ReadTask& task, Status st) {
    if (!st.ok()) task.batch->RecordError(task.slot, std::move(st));
    if (task.batch->pending.fetch_sub(1) == 1) {
      std::lock_guard lock(mu_);
      task.batch->done = true;
      if (rec_) {
        rec_->batches_in_progress--;
        rec_->batches_ready++;
      }
      ready_.notify_all();
    }
  }

  Bytes TakeBuffer() {
    std::lock_guard lock(buffers_mu_);
    if (spare_.empty()) return std::make_unique<std::vector<uint8_t>>();
    Bytes b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  // Read buffers are bounded by the queues (io_depth readers, the decode queue,
  // the decoders), so the spare list never exceeds that many.
  void GiveBuffer(Bytes b) {
    std::lock_guard lock(buffers_mu_);
    spare_.push_back(std::move(b));
  }

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

class LoaderImpl : public Loader {
 public:
  LoaderImpl(Dataset data, std::shared_ptr<BufferPool> pool)
      : data_(std::move(data)),
        files_(&data_.shards),
        pool_(std::move(pool)),
        recorder_(data_.options.record_stats ? std::make_unique<Recorder>(data_.options.trace_spans) : nullptr) {
    data_.recorder = recorder_.get();
  }
  ~LoaderImpl() override { run_.reset(); }

  Status Init() {
    counts_.reserve(data_.indexes.size());
    for (const ShardIndex& index : data_.indexes) counts_.push_back(static_cast<uint32_t>(index.samples.size()));
    return Plan(0);
  }

  Status SetEpoch(uint64_t epoch) override {
    run_.reset();
    STOKER_RETURN_IF_ERROR(Plan(epoch));
    next_batch_ = 0;
    Start();
    return Status::Ok();
  }

  Result<std::shared_ptr<Batch>> Next() override {
    if (next_batch_ >= plan_.info.batches) return std::shared_ptr<Batch>();
    if (!run_) Start();
    const uint64_t begin = NowNs();
    std::unique_ptr<BatchWork> work = run_->NextReady();
    if (recorder_) {
      const uint64_t end = NowNs();
      recorder_->consumer_wait_ns.fetch_add(end - begin, std::memory_order_relaxed);
      recorder_->AddSpan({SpanKind::kWait, kConsumerThread, begin, end, next_batch_, -1});
    }
    if (!work) return Cancelled("the loader was shut down");
    ++next_batch_;
    if (work->error_slot >= 0) return work->error;
    return std::shared_ptr<Batch>(std::make_shared<BatchImpl>(std::move(work), data_.layout));
  }

  void Stop() override { run_.reset(); }

  RecorderSnapshot Stats() const override { return recorder_ ? recorder_->Snapshot() : RecorderSnapshot{}; }
  std::string TraceJson() const override {
    return recorder_ ? recorder_->TraceJson() : std::string("{\"traceEvents\":[]}");
  }

  const PlanInfo& plan() const override { return plan_.info; }
  const LoaderOptions& options() const override { return data_.options; }

  std::string State() const override {
    nlohmann::json j = {{"epoch", epoch_},
                        {"next_batch", next_batch_},
                        {"seed", data_.options.seed},
                        {"rank", data_.options.rank},
                        {"world_size", data_.options.world_size},
                        {"batch_size", data_.options.batch_size},
                        {"dataset_samples", plan_.info.dataset_samples}};
    return j.dump();
  }

  Status Restore(const std::string& state) override {
    nlohmann::json j = nlohmann::json::parse(state, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument("loader state is not a JSON object");
    auto field = [&](const char* key) -> Result<int64_t> {
      if (!j.contains(key) || !j[key].is_number_integer()) {
        return InvalidArgument(std::string("loader state lacks integer '") + key + "'");
      }
      return j[key].get<int64_t>();
    };
    const std::pair<const char*, int64_t> must_match[] = {
        {"seed", static_cast<int64_t>(data_.options.seed)},
        {"rank", data_.options.rank},
        {"world_size", data_.options.world_size},
        {"batch_size", data_.options.batch_size},
        {"dataset_samples", plan_.info.dataset_samples}};
    for (const auto& [key, mine] : must_match) {
      STOKER_ASSIGN_OR_RETURN(int64_t theirs, field(key));
      if (theirs != mine) {
        return InvalidArgument(std::string("loader state was saved with ") + key + "=" + std::to_string(theirs) +
                               ", this loader has " + std::to_string(mine));
      }
    }
    STOKER_ASSIGN_OR_RETURN(int64_t epoch, field("epoch"));
    STOKER_ASSIGN_OR_RETURN(int64_t next, field("next_batch"));
    run_.reset();
    STOKER_RETURN_IF_ERROR(Plan(static_cast<uint64_t>(epoch)));
    if (next < 0 || next > plan_.info.batches) return InvalidArgument("loader state next_batch is out of range");
    next_batch_ = next;
    Start();
    return Status::Ok();
  }

 private:
  Status Plan(uint64_t epoch) {
    STOKER_ASSIGN_OR_RETURN(plan_, PlanEpoch(counts_, data_.options, epoch));
    epoch_ = epoch;
    return Status::Ok();
  }
  void Start() {
    if (next_batch_ < plan_.info.batches) {
      run_ = std::make_unique<EpochRun>(&data_, &files_, pool_, &plan_, epoch_, next_batch_);
    }
  }

  static constexpr uint32_t kConsumerThread = 999;

  Dataset data_;
  ShardFiles files_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<Recorder> recorder_;  // outlives run_, whose threads record into it
  std::vector<uint32_t> counts_;
  EpochPlan plan_;
  uint64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::unique_ptr<EpochRun> run_;  // last member: torn down first
};

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Create(LoaderOptions options) {
  if (options.batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  if (options.prefetch_batches < 1) return InvalidArgument("prefetch_batches must be at least 1");
  Dataset data;
  STOKER_ASSIGN_OR_RETURN(data.shards, ExpandSources(options.sources));
  for (const std::string& shard : data.shards) {
    STOKER_ASSIGN_OR_RETURN(ShardIndex index, LoadOrBuildShardIndex(shard, options.key_rule));
    data.indexes.push_back(std::move(index));
  }
  // The first sample teaches the shapes of array fields.
  const ShardIndex* first = nullptr;
  for (const ShardIndex& index : data.indexes)
    if (!index.samples.empty()) {
      first = &index;
      break;
    }
  if (first == nullptr) return InvalidArgument("the shards hold no samples");
  const SampleEntry& probe_entry = first->samples[0];
  STOKER_ASSIGN_OR_RETURN(File file, File::OpenRead(first->shard_path));
  std::vector<uint8_t> probe(probe_entry.end - probe_entry.begin);
  STOKER_RETURN_IF_ERROR(file.PRead(probe_entry.begin, probe));
  STOKER_ASSIGN_OR_RETURN(data.layout, MakeBatchLayout(options.fields, options.batch_size, probe_entry, probe,
                                                       first->shard_path));
  data.options = std::move(options);
  auto pool = BufferPool::Create(data.layout.buffer_bytes, static_cast<size_t>(data.options.prefetch_batches) + 1);
  auto loader = std::make_unique<LoaderImpl>(std::move(data), std::move(pool));
  STOKER_RETURN_IF_ERROR(loader->Init());
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace stoker
