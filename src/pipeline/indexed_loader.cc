// pipeline/indexed_loader.cc — the indexed mode's Loader: the dataset's
// shards and indexes, the epoch plan, the batch-buffer pool, and one
// EpochRun at a time (see epoch_run.h for the threads). SetEpoch, Restore,
// Stop and the destructor replace or end the run; the position (epoch, next
// batch) lives here, so a run can stop and a new one resume exactly where
// it left off.
// Thread-safety: Loader methods from one consumer thread; see loader.h.
#include "pipeline/indexed_loader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/buffer_pool.h"
#include "core/file.h"
#include "formats/parquet_file.h"
#include "io/reader.h"
#include "observe/clock.h"
#include "pipeline/batch_layout.h"
#include "pipeline/batch_stride.h"
#include "pipeline/batch_view.h"
#include "pipeline/dataset.h"
#include "pipeline/dataset_fingerprint.h"
#include "pipeline/device_stage.h"
#include "pipeline/elastic.h"
#include "pipeline/engine_stats.h"
#include "pipeline/epoch_run.h"
#include "pipeline/image_folder.h"
#include "pipeline/map_probe.h"
#include "pipeline/memory_budget.h"
#include "pipeline/mix_order.h"
#include "pipeline/mix_seed.h"
#include "pipeline/planner.h"
#include "pipeline/read_runs.h"
#include "pipeline/sample_map.h"
#include "pipeline/shard_indexes.h"
#include "pipeline/source_names.h"
#include "pipeline/skip_refill.h"
#include "pipeline/token_source.h"
#include "pipeline/tune_config.h"
#include "stoker/loader.h"

namespace stoker {

namespace {

// The shards read with pread, never mapped (pipeline/shard_files.h): those
// whose order is single samples permuted (over the dataset or a window).
// Each sample is a jump, and a fault in a mapping brings in the kernel's
// whole readahead folio, up to megabytes, and keeps it mapped. Rank 0 of 8
// over 200k tiny samples grew by 245 MB by its first batch, 226 of them
// mapped pages, against 27 MB read with pread (bench/scale_memory.py,
// read_ahead_kb 8192, kernel 6.18), at the same V speed shuffled
// (1,036-1,070 samples/s against 996-1,097 mapped). A mixture's shards go
// by their own source's unit, not the loader-wide one. Parquet files too:
// a row group's column chunks are read whole into Arrow's buffers, so their
// mapped pages would only double them in RSS.
std::vector<bool> PreadOnlyShards(const Dataset& d) {
  const LoaderOptions& o = d.options;
  const bool permuted = !d.tokens && o.shuffle && o.shuffle_buffer == 0;
  const std::vector<uint32_t> first_shards = SourceFirstShards(o.mix);
  std::vector<bool> pread(d.shards.size());
  for (uint32_t i = 0; i < pread.size(); ++i) {
    const int block =
        o.mix.shuffle_blocks.empty() ? o.shuffle_block : o.mix.shuffle_blocks[SourceOfShard(first_shards, i)];
    pread[i] = IsParquetPath(d.shards[i]) || (permuted && block <= 1);
  }
  return pread;
}

// Shard bytes the loader may keep mapped at once (the shards not read with
// pread): mapped pages count in the process's RSS, so under a memory budget
// only what the budget leaves beyond the engine's own need; without one, no bound.
uint64_t MappableBytes(const Dataset& d) {
  if (d.options.memory_budget == 0 || d.tokens) return ShardFiles::kMapUnbounded;
  const uint64_t need =
      EstimateMemory(WithSettings(d.options, d.tune_max), d.layout, d.indexes->summaries(), d.row_group_bytes).total();
  return d.options.memory_budget > need ? d.options.memory_budget - need : 0;
}

const char* PartitionName(PartitionPolicy p) {
  switch (p) {
    case PartitionPolicy::kPadRepeat:
      return "pad";
    case PartitionPolicy::kExact:
      return "exact";
    case PartitionPolicy::kDropRemainder:
      break;
  }
  return "drop";
}

// An order that reads one part of the shards before the next (shard order, a
// shuffle buffer's stream), so tables dropped are rarely needed again.
bool HasLocality(const LoaderOptions& o) { return !o.shuffle || o.shuffle_buffer > 0 || o.shuffle_window > 0; }

// This rank's first sample of epoch 0 (the first shard's first where the
// rank has none): the sample that teaches the layout then costs no other
// shard's index or bytes, which over remote shards are round trips before
// the first batch. The plan it took is epoch 0's, kept for the loader.
struct Probe {
  SampleRef ref;
  std::optional<EpochPlan> epoch0;  // absent where planning failed: the loader's own planning says why
};
Result<Probe> ProbeSample(const std::vector<ShardSummary>& shards, const LoaderOptions& options) {
  std::vector<uint32_t> counts;
  for (const ShardSummary& s : shards) counts.push_back(s.samples);
  const auto first = std::find_if(counts.begin(), counts.end(), [](uint32_t n) { return n > 0; });
  if (first == counts.end()) return InvalidArgument("the shards hold no samples");
  Probe probe{SampleRef{static_cast<uint32_t>(first - counts.begin()), 0, 0}, std::nullopt};
  Result<EpochPlan> plan = PlanEpoch(counts, options, 0);
  if (!plan.ok()) return probe;
  if (plan->info.rank_samples > 0) probe.ref = plan->At(0);
  probe.epoch0 = std::move(plan.value());
  return probe;
}

// A Parquet row's fields are the columns of the same names (formats/parquet_file.h).
// The key column rides along as one more value of each row (pipeline/sample_keys.h).
std::vector<std::string> ParquetColumns(const LoaderOptions& options) {
  std::vector<std::string> columns;
  for (const FieldSpec& f : options.fields) columns.push_back(f.field);
  if (!options.key_column.empty() &&
      std::find(columns.begin(), columns.end(), options.key_column) == columns.end()) {
    columns.push_back(options.key_column);
  }
  return columns;
}

// settings["order"]: the order in words, a Parquet layout's limit on the
// mix, and for a mixture its law and each source's own order.
std::string OrderInWords(const LoaderOptions& options, const std::vector<ShardSummary>& summaries,
                         const std::vector<int>& source_parquet_blocks, bool parquet) {
  std::vector<uint32_t> counts;
  for (const ShardSummary& s : summaries) counts.push_back(s.samples);
  if (options.mix.names.empty()) {
    return DescribeOrder(options) + (parquet ? DescribeParquetMix(options, counts) : "");
  }
  const MixOptions& mix = options.mix;
  std::vector<std::string> within;
  for (size_t s = 0, first = 0; s < mix.names.size(); first += mix.shards[s++]) {
    LoaderOptions pass = options;
    pass.shuffle_block = mix.shuffle_blocks[s];
    pass.shuffle_mix = mix.shuffle_mixes[s];
    const std::vector<uint32_t> rows(counts.begin() + static_cast<std::ptrdiff_t>(first),
                                     counts.begin() + static_cast<std::ptrdiff_t>(first + mix.shards[s]));
    within.push_back(DescribeOrder(pass) + (source_parquet_blocks[s] > 0 ? DescribeParquetMix(pass, rows) : ""));
  }
  return DescribeMix(counts, options, within);
}

// The failed slots of a batch whose first pass is complete, lowest first.
std::vector<SlotFailure> LeftSlots(BatchInFlight& work) {
  std::vector<SlotFailure> out;
  for (const FailedSlot& f : work.failures) out.push_back({f.slot, f.status.ToString()});
  std::sort(out.begin(), out.end(), [](const SlotFailure& a, const SlotFailure& b) { return a.slot < b.slot; });
  return out;
}

// A saved state's "elastic" list (the world sizes it was cut by, and where):
// empty when the state has none.
Result<std::vector<ElasticStage>> ElasticStages(const nlohmann::json& j) {
  std::vector<ElasticStage> stages;
  if (j.contains("elastic") && j["elastic"].is_array()) {
    for (const auto& st : j["elastic"]) {
      if (!st.is_array() || st.size() != 2 || !st[0].is_number_integer() || !st[1].is_number_integer()) {
        return InvalidArgument("loader state has a malformed 'elastic' list");
      }
      stages.push_back({st[0].get<int>(), st[1].get<int64_t>()});
    }
  }
  return stages;
}

class LoaderImpl : public Loader {
 public:
  LoaderImpl(Dataset data, std::shared_ptr<BufferPool> pool, TuneConfig tune)
      : data_(std::move(data)),
        files_(&data_.shards, data_.options.max_open_files, MappableBytes(data_), *data_.options.storage,
               PreadOnlyShards(data_)),
        refill_(&data_, &files_),
        pool_(std::move(pool)),
        stats_(data_.options, std::move(tune)) {
    data_.recorder = stats_.recorder();
    if (data_.recorder && !data_.options.mix.shards.empty()) {  // a mixture's reads are also counted by source
      data_.recorder->SetSources(SourceFirstShards(data_.options.mix));
    }
    data_.upscales = std::make_shared<UpscaleCounter>(data_.layout.fields.size());
  }
  ~LoaderImpl() override { run_.reset(); }

  // epoch0: this rank's plan of epoch 0 where the caller made it already (ProbeSample).
  Status Init(std::optional<EpochPlan> epoch0) {
    token_consumed_ = data_.options.tokens.consumed_samples;
    if (data_.indexes) {  // not for tokens
      for (const ShardSummary& shard : data_.indexes->summaries()) counts_.push_back(shard.samples);
      fingerprint_ = DatasetFingerprint(data_);
    }
    source_names_ = MixSourceNames(data_.shards, data_.options.mix);
    if (epoch0 && !data_.tokens) {
      STOKER_ASSIGN_OR_RETURN(EpochPlan own, OwnBatches(std::move(*epoch0)));
      Adopt(0, std::make_shared<const EpochPlan>(std::move(own)));
    } else {
      STOKER_RETURN_IF_ERROR(Plan(0));
    }
    // The first batch at once: epoch 0's reads begin now, with the index
    // loaded and the threads started, while the caller sets itself up; a
    // SetEpoch(0) before the first Next keeps this run. A token loader starts
    // when asked (at its consumed_samples). Over remote shards too: a run
    // that is not wanted after all stops promptly (its reads are cancelled,
    // io/cancel.h).
    if (!data_.tokens) Start();
    return Status::Ok();
  }

  Status SetEpoch(uint64_t epoch) override {
    // The run already makes this epoch from its start and nothing of it was
    // delivered: it is the run a restart would make.
    if (run_ && !data_.tokens && elastic_.empty() && epoch == epoch_ && next_batch_ == 0 &&
        run_->AtStartOf(epoch)) {
      return Status::Ok();
    }
    // The run already prepares this epoch (the one after the epoch it just
    // delivered in full): keep its batches (see epoch_run.h).
    if (run_ && next_batch_ == plan_->info.batches) {
      if (std::shared_ptr<const EpochPlan> next = run_->Continue(epoch)) {
        Adopt(epoch, std::move(next));
        next_batch_ = 0;
        stats_.ResetWait();
        return Status::Ok();
      }
    }
    run_.reset();
    STOKER_RETURN_IF_ERROR(Plan(epoch));
    next_batch_ = 0;
    Start();
    return Status::Ok();
  }

  Result<std::shared_ptr<Batch>> Next() override {
    bool waiting = false;
    return NextWithin(0, &waiting);
  }

  Result<std::shared_ptr<Batch>> NextWithin(int wait_ms, bool* waiting) override {
    *waiting = false;
    if (next_batch_ >= plan_->info.batches) return std::shared_ptr<Batch>();
    if (!run_) Start();
    Result<std::unique_ptr<BatchWork>> ready =
        stats_.Wait(next_batch_, [&](auto since) { return run_->NextReady(wait_ms, since); });
    std::unique_ptr<BatchWork> work = ready.ok() ? std::move(ready).value() : nullptr;
    if (ready.ok() && !work) {  // not ready within wait_ms: the wait goes on across polls for timeout_ms
      *waiting = true;
      return std::shared_ptr<Batch>();
    }
    if (!ready.ok()) return source_names_.Name(ready.status());
    ++next_batch_;
    Tune();
    std::vector<SlotFailure> left;
    if (data_.options.on_error == OnError::kSkip && data_.options.leave_failed_slots) {
      left = LeftSlots(*work);  // the rank's refills are made where its every batch is received
    } else if (data_.options.on_error == OnError::kSkip) {
      for (const FailedSlot& f : work->failures) work->gpu.Drop(f.slot);  // before Resolve takes the failures
      STOKER_RETURN_IF_ERROR(refill_.Resolve(*work, *plan_));  // refills failed slots, keeps the budget
    } else if (work->error_slot >= 0) {
      return source_names_.Name(work->error);
    }
    // Its device copy was issued when it became ready, unless a slot was refilled since (then now).
    const int64_t index = work->index;
    return Deliver(std::move(work), index, data_.layout, data_.device.get(), std::move(left));
  }

  Result<std::shared_ptr<Batch>> Receive(ReceivedBatch in) override {
    if (data_.tokens) return FailedPrecondition("Receive is for shard loaders, not token loaders");
    if (!rank_plan_) {  // this epoch's, uncut by batch_stride (the refills' reserve)
      STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanEpoch(counts_, data_.options, epoch_));
      rank_plan_ = std::make_shared<const EpochPlan>(std::move(plan));
    }
    const EpochPlan& plan = *rank_plan_;
    const int64_t bs = data_.options.batch_size;
    if (in.index < 0 || in.index >= plan.info.batches) {
      return InvalidArgument("received batch " + std::to_string(in.index) + " is outside this epoch's " +
                             std::to_string(plan.info.batches) + " batches");
    }
    const int size = static_cast<int>(std::clamp<int64_t>(plan.info.rank_samples - in.index * bs, 0, bs));
    const BatchLayout& layout = data_.layout;
    if (in.arrays.size() != layout.arrays.size()) {
      return InvalidArgument("received batch " + std::to_string(in.index) + " has " +
                             std::to_string(in.arrays.size()) + " arrays, this loader's batches " +
                             std::to_string(layout.arrays.size()));
    }
    auto work = std::make_unique<BatchWork>();
    work->index = in.index;
    work->epoch = epoch_;  // no plan: no task reads this batch
    work->size = size;
    // The caller may hold every buffer of the pool (list(loader)): lend one past it rather than wait.
    if (pool_->free_count() == 0) pool_->GrantOverflow();
    work->lease = pool_->Acquire();
    pool_->RevokeOverflow();
    if (!work->lease) return Cancelled("the loader is stopping");
    for (size_t i = 0; i < layout.arrays.size(); ++i) {
      const ArraySlot& slot = layout.arrays[i];
      const ArrayView& a = in.arrays[i];
      const size_t want = slot.sample_bytes * static_cast<size_t>(size);
      if (a.name != slot.name || a.nbytes != want || (want > 0 && !a.data)) {
        return InvalidArgument("received batch " + std::to_string(in.index) + " has array '" + a.name + "' of " +
                               std::to_string(a.nbytes) + " bytes where this loader's has '" + slot.name +
                               "' of " + std::to_string(want));
      }
      if (want > 0) std::memcpy(work->lease->data() + slot.offset, a.data, want);
    }
    if (data_.options.include_keys &&
        (in.keys.size() != static_cast<size_t>(size) || in.urls.size() != static_cast<size_t>(size))) {
      return InvalidArgument("received batch " + std::to_string(in.index) + " has " +
                             std::to_string(in.keys.size()) + " keys for " + std::to_string(size) + " samples");
    }
    work->keys = std::move(in.keys);
    work->urls = std::move(in.urls);
    if (data_.options.on_error == OnError::kSkip) {
      const SkipRefiller::Target target{in.index, size, work->lease->data(), &work->keys, &work->urls};
      STOKER_RETURN_IF_ERROR(refill_.Resolve(target, std::move(in.failures), plan));
    } else if (!in.failures.empty()) {
      return DataLoss(in.failures.front().cause);
    }
    return Deliver(std::move(work), in.index, data_.layout, data_.device.get());  // copied now: complete only now
  }

  void Stop() override { run_.reset(); }

  RecorderSnapshot Stats() const override { return stats_.Snapshot(data_); }
  std::string TraceJson() const override { return stats_.TraceJson(); }

  const PlanInfo& plan() const override { return plan_->info; }
  const LoaderOptions& options() const override { return data_.options; }

  std::string State() const override {
    if (data_.tokens) {
      // Megatron's own resume point: global samples consumed by all ranks.
      // The exact partition's partial last global batch ends at the dataset's end.
      const int64_t consumed = std::min<int64_t>(
          plan_->info.dataset_samples,
          token_consumed_ + next_batch_ * data_.options.batch_size * data_.options.world_size);
      return nlohmann::json({{"consumed_samples", consumed},
                             {"seed", data_.options.seed},
                             {"rank", data_.options.rank},
                             {"world_size", data_.options.world_size},
                             {"batch_size", data_.options.batch_size},
                             {"dataset_samples", plan_->info.dataset_samples}})
          .dump();
    }
    nlohmann::json j = {{"epoch", epoch_},
                        {"next_batch", next_batch_},
                        {"seed", data_.options.seed},
                        {"rank", data_.options.rank},
                        {"world_size", data_.options.world_size},
                        {"batch_size", data_.options.batch_size},
                        {"dataset_samples", plan_->info.dataset_samples},
                        {"dataset", fingerprint_},
                        {"on_error", data_.options.on_error == OnError::kSkip ? "skip" : "raise"},
                        {"partition", PartitionName(data_.options.partition)},
                        {"skip", refill_.ToJson()}};
    // The order's unit (auto resolves it from where the shards are): a state
    // restored over a copy of the shards elsewhere must follow the same order.
    if (data_.options.shuffle && data_.options.shuffle_buffer == 0) {
      j["shuffle_block"] = data_.options.shuffle_block;
      j["shuffle_window"] = std::max(0, data_.options.shuffle_window);  // -1 unresolved plans as 0
      j["shuffle_mix"] = std::max(0, data_.options.shuffle_mix);
    }
    if (!data_.options.mix.names.empty()) j["mix"] = MixState();
    if (!elastic_.empty()) {  // this epoch resumed on another world size: the stages before this one
      j["elastic"] = nlohmann::json::array();
      for (const ElasticStage& st : elastic_) j["elastic"].push_back({st.world_size, st.next_batch});
    }
    return j.dump();
  }

  Status Restore(const std::string& state) override {
    nlohmann::json j = nlohmann::json::parse(state, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument("loader state is not a JSON object");
    // Saved by another number of ranks: elastic resume (pipeline/elastic.h).
    const bool elastic = j.contains("world_size") && j["world_size"].is_number_integer() &&
                         j["world_size"].get<int64_t>() != data_.options.world_size;
    STOKER_RETURN_IF_ERROR(CheckSavedWith(j, {{"seed", static_cast<int64_t>(data_.options.seed)}}));
    if (!elastic) {
      STOKER_RETURN_IF_ERROR(
          CheckSavedWith(j, {{"rank", data_.options.rank}, {"world_size", data_.options.world_size}}));
    }
    STOKER_RETURN_IF_ERROR(CheckSavedWith(
        j, {{"batch_size", data_.options.batch_size}, {"dataset_samples", plan_->info.dataset_samples}}));
    if (data_.tokens) {
      STOKER_ASSIGN_OR_RETURN(int64_t consumed, StateInteger(j, "consumed_samples"));
      return RestoreConsumed(consumed);
    }
    if (j.contains("dataset") && j["dataset"] != fingerprint_) {
      return InvalidArgument("loader state was saved for a different dataset (fingerprint " +
                             j["dataset"].dump() + ", this loader's " + std::to_string(data_.shards.size()) +
                             " shards have \"" + fingerprint_ + "\"): the shard list, a shard's size or its "
                             "sample count changed");
    }
    const char* on_error = data_.options.on_error == OnError::kSkip ? "skip" : "raise";
    if (j.contains("on_error") && j["on_error"] != on_error) {
      return InvalidArgument("loader state was saved with on_error=" + j["on_error"].dump() +
                             ", this loader has \"" + on_error + "\"");
    }
    if (data_.options.shuffle && data_.options.shuffle_buffer == 0 && j.contains("shuffle_block") &&
        j["shuffle_block"] != data_.options.shuffle_block) {
      return InvalidArgument("loader state was saved with shuffle_block=" + j["shuffle_block"].dump() +
                             ", this loader has " + std::to_string(data_.options.shuffle_block) +
                             " (auto picks by where the shards are): pass shuffle_block=" +
                             j["shuffle_block"].dump() + " to continue that order");
    }
    if (data_.options.shuffle && data_.options.shuffle_buffer == 0 && j.contains("shuffle_window") &&
        j["shuffle_window"] != std::max(0, data_.options.shuffle_window)) {
      return InvalidArgument("loader state was saved with shuffle_window=" + j["shuffle_window"].dump() +
                             ", this loader has " + std::to_string(std::max(0, data_.options.shuffle_window)) +
                             ": pass shuffle_window=" + j["shuffle_window"].dump() + " to continue that order");
    }
    // A state from before the mix has none: its order kept a block's samples
    // in member order, which is shuffle_mix 0.
    const int64_t saved_mix =
        j.contains("shuffle_mix") && j["shuffle_mix"].is_number_integer() ? j["shuffle_mix"].get<int64_t>() : 0;
    if (data_.options.shuffle && data_.options.shuffle_buffer == 0 && data_.options.shuffle_block > 1 &&
        saved_mix != std::max(0, data_.options.shuffle_mix)) {
      return InvalidArgument("loader state was saved with shuffle_mix=" + std::to_string(saved_mix) +
                             " (blocks whose samples are mixed together), this loader has " +
                             std::to_string(std::max(0, data_.options.shuffle_mix)) +
                             " (auto: Parquet's, lowered to fit memory_budget): load it with the memory_budget it "
                             "was saved with");
    }
    STOKER_RETURN_IF_ERROR(CheckMixState(j));
    // Each policy cuts the epoch differently: the batches one delivered are
    // not the batches another would skip.
    const char* partition = PartitionName(data_.options.partition);
    if (j.contains("partition") && j["partition"] != partition) {
      return InvalidArgument("loader state was saved with partition=" + j["partition"].dump() +
                             ", this loader has \"" + partition + "\"");
    }
    STOKER_ASSIGN_OR_RETURN(int64_t epoch, StateInteger(j, "epoch"));
    STOKER_ASSIGN_OR_RETURN(int64_t next, StateInteger(j, "next_batch"));
    run_.reset();
    if (!data_.options.mix.names.empty()) {
      STOKER_ASSIGN_OR_RETURN(bool planned, RestoreMix(j, static_cast<uint64_t>(epoch), next, elastic));
      if (planned) {  // the rest of an epoch whose weights changed: its own plan, next_batch counted in it
        // A saved segment goes on at its next_batch, with its skip log; a new one starts at its first batch.
        const bool saved_segment = j["mix"].contains("segment");
        if (!saved_segment) next = 0;
        if (next < 0 || next > plan_->info.batches) return InvalidArgument("loader state next_batch is out of range");
        if (saved_segment && j.contains("skip")) STOKER_RETURN_IF_ERROR(refill_.FromJson(j["skip"]));
        next_batch_ = next;
        Start();
        return Status::Ok();
      }
    }
    STOKER_RETURN_IF_ERROR(Plan(static_cast<uint64_t>(epoch)));
    STOKER_ASSIGN_OR_RETURN(std::vector<ElasticStage> stages, ElasticStages(j));
    if (elastic) {
      stages.push_back({j["world_size"].get<int>(), next});
      next = 0;
    }
    if (!stages.empty()) {
      STOKER_ASSIGN_OR_RETURN(EpochPlan remaining,
                              PlanRemaining(counts_, data_.options, static_cast<uint64_t>(epoch), stages));
      rank_plan_ = std::make_shared<const EpochPlan>(remaining);
      STOKER_ASSIGN_OR_RETURN(remaining, OwnBatches(std::move(remaining)));
      plan_ = std::make_shared<const EpochPlan>(std::move(remaining));
      elastic_ = std::move(stages);
    }
    if (next < 0 || next > plan_->info.batches) return InvalidArgument("loader state next_batch is out of range");
    // The skip log names slots of the old ranks' batches: it does not carry across world sizes.
    if (j.contains("skip") && !elastic) STOKER_RETURN_IF_ERROR(refill_.FromJson(j["skip"]));
    next_batch_ = next;
    Start();
    return Status::Ok();
  }

  LoaderSettings Settings() const override {
    LoaderSettings s = stats_.Settings(data_);
    s.order = data_.order;
    if (data_.indexes) {
      s.index_held_bytes = data_.indexes->held_bytes();
      s.index_max_bytes = data_.indexes->max_bytes();
      s.index_loads = data_.indexes->loads();
      s.index_shards = data_.indexes->summaries().size();
      s.index_from = data_.index_from;
      s.index_remote_read = data_.remote_scanned;
    }
    return s;
  }
  std::vector<TuneChange> TuneLog() const override { return stats_.TuneLog(); }
  std::vector<TuneChange> TakeTuneLog() override { return stats_.TakeTuneLog(); }

  SkipCounts Skips() const override { return refill_.counts(); }
  std::vector<SkipRecord> TakeSkipLog() override { return refill_.TakeLog(); }
  size_t OpenShardFiles() const override { return files_.open_count(); }

  std::vector<std::string> SourcesOf(const std::vector<std::string>& urls) const override {
    return source_names_.Of(urls);
  }

 private:
  Status RestoreConsumed(int64_t consumed) {
    run_.reset();
    const int64_t saved = token_consumed_;
    token_consumed_ = consumed;
    Status st = Plan(0);
    if (!st.ok()) {
      token_consumed_ = saved;
      return st;
    }
    next_batch_ = 0;
    Start();
    return Status::Ok();
  }

  // A mixture's part of the state: its law and sources with their weights,
  // each source's draws before this epoch (all ranks) and its pass, and the
  // samples this rank has delivered of each in this epoch (by the plan: a
  // skipped sample's refill counts as the planned one's source).
  nlohmann::json MixState() const {
    // An epoch before a change of weights at its end reports the weights it ran with.
    const MixOptions& mix = prior_mix_ && epoch_ < data_.options.mix.base_epoch ? *prior_mix_ : data_.options.mix;
    nlohmann::json j = {{"law", MixLawName(mix.law)}, {"names", mix.names}, {"weights", mix.weights}};
    if (mix.law == MixLaw::kCounts) j["choose"] = mix.choose;
    j["base_epoch"] = mix.base_epoch;
    j["base_draws"] = mix.base_draws;
    if (data_.options.shuffle && data_.options.shuffle_buffer == 0) {
      j["shuffle_blocks"] = mix.shuffle_blocks;
      j["shuffle_mixes"] = mix.shuffle_mixes;
    }
    if (!segment_.is_null()) j["segment"] = segment_;
    // This epoch's order as planned (after a weight change in it, the order it began with).
    LoaderOptions planned = data_.options;
    planned.mix = mix;
    if (!segment_.is_null()) {
      planned.mix.weights = segment_["weights"].get<std::vector<double>>();
      planned.mix.base_epoch = segment_["base_epoch"].get<uint64_t>();
      planned.mix.base_draws = segment_["base_draws"].get<std::vector<uint64_t>>();
    }
    Result<std::shared_ptr<const MixOrder>> order = MixOrder::Make(counts_, planned, epoch_);
    if (!order.ok()) return j;
    const MixOrder& o = **order;
    const std::vector<uint64_t> drawn = o.DrawnBefore();
    std::vector<uint64_t> passes(drawn.size()), delivered(drawn.size(), 0);
    for (size_t s = 0; s < drawn.size(); ++s) passes[s] = drawn[s] / o.source_samples()[s];
    const int64_t done = std::min<int64_t>(plan_->info.rank_samples, next_batch_ * data_.options.batch_size);
    const auto* mixed = plan_->order ? dynamic_cast<const MixOrder*>(plan_->order->computed()) : nullptr;
    if (mixed && !plan_->strided && data_.options.batch_stride <= 1) {
      // By the plan's spans of the order: counted by the allocation, not walked.
      const uint64_t d = static_cast<uint64_t>(done);
      for (size_t k = 0; k < plan_->spans.size() && plan_->span_start[k] < d; ++k) {
        const uint64_t take = std::min(plan_->spans[k].count, d - plan_->span_start[k]);
        const std::vector<uint64_t> c = mixed->CountIn(plan_->spans[k].first, plan_->spans[k].first + take);
        for (size_t s = 0; s < c.size(); ++s) delivered[s] += c[s];
      }
    } else {
      for (int64_t i = 0; i < done; ++i) ++delivered[o.SourceOfShard(plan_->At(i).shard)];
    }
    j["drawn_before_epoch"] = drawn;
    j["pass"] = passes;
    j["samples"] = o.source_samples();
    j["delivered"] = delivered;
    return j;
  }
  // A mixture's state restores only onto the same sources, law and weights.
  Status CheckMixState(const nlohmann::json& j) const {
    const MixOptions& mix = data_.options.mix;
    if (!j.contains("mix")) {
      if (mix.names.empty()) return Status::Ok();
      return InvalidArgument("loader state was saved by a loader of one dataset, this loader is a mixture");
    }
    if (mix.names.empty()) return InvalidArgument("loader state was saved by a mixture, this loader is not one");
    const nlohmann::json& m = j["mix"];
    if (m.value("names", nlohmann::json()) != nlohmann::json(mix.names) ||
        m.value("law", std::string()) != MixLawName(mix.law)) {
      return InvalidArgument("loader state was saved by a mixture of " + m.value("names", nlohmann::json()).dump() +
                             " (law " + m.value("law", nlohmann::json()).dump() + "), this loader mixes " +
                             nlohmann::json(mix.names).dump() + " (law \"" + MixLawName(mix.law) + "\")");
    }
    if (!m.contains("weights") || !m["weights"].is_array() || m["weights"].size() != mix.names.size()) {
      return InvalidArgument("loader state's mixture has no weight for each source");
    }
    // Law counts carries no base to change them from: each epoch is one period of its counts.
    if (mix.law == MixLaw::kCounts && (m["weights"] != nlohmann::json(mix.weights) ||
                                       m.value("choose", nlohmann::json::array()) != nlohmann::json(mix.choose))) {
      return InvalidArgument("loader state was saved with repeat " + m["weights"].dump() + " and choose " +
                             m.value("choose", nlohmann::json::array()).dump() + ", this loader has repeat " +
                             nlohmann::json(mix.weights).dump() + " and choose " + nlohmann::json(mix.choose).dump() +
                             ": under law counts restore with the saved ones (new weights carry on from a state "
                             "only under law sample)");
    }
    // Each source's order unit (auto picks it by where its shards are and, for Parquet, its row groups).
    const std::pair<const char*, const std::vector<int>*> units[] = {{"shuffle_blocks", &mix.shuffle_blocks},
                                                                     {"shuffle_mixes", &mix.shuffle_mixes}};
    for (const auto& [unit, mine] : units) {
      if (m.contains(unit) && data_.options.shuffle && data_.options.shuffle_buffer == 0 &&
          m[unit] != nlohmann::json(*mine)) {
        return InvalidArgument("loader state was saved with the sources' " + std::string(unit) + " " +
                               m[unit].dump() + ", this loader's are " + nlohmann::json(*mine).dump() +
                               " (auto picks each source's by where its shards are): restore it over the sources "
                               "where they were saved");
      }
    }
    return Status::Ok();
  }

  // A mixture's restore (law sample keeps its passes across a weight change;
  // README, "Mixtures"): the weights saved and in effect from the saved
  // base, or, where this loader's differ, the new ones from the state's
  // position on. At an epoch's start the new weights' stream simply goes on
  // from each source's draws so far. In an epoch's middle the rest of the
  // epoch (every rank's unconsumed part, as elastic resume cuts it) becomes a
  // segment drawn by the new weights, each source starting a fresh pass after
  // every pass the interrupted order reaches (what those passes had not yet
  // delivered is left out); later epochs go on after the segment. Returns
  // true where it planned the epoch (a segment).
  Result<bool> RestoreMix(const nlohmann::json& j, uint64_t epoch, int64_t next, bool elastic) {
    MixOptions& mix = data_.options.mix;
    prior_mix_.reset();
    const nlohmann::json& m = j["mix"];
    const std::vector<double> saved = m["weights"].get<std::vector<double>>();
    const uint64_t saved_base_epoch = m.value("base_epoch", uint64_t{0});
    const std::vector<uint64_t> saved_base = m.value("base_draws", std::vector<uint64_t>{});
    STOKER_ASSIGN_OR_RETURN(std::vector<ElasticStage> stages, ElasticStages(j));
    if (m.contains("segment")) {  // this epoch's weights changed in its middle already
      const nlohmann::json& seg = m["segment"];
      if (elastic) {
        return InvalidArgument("loader state is of an epoch whose mixture weights changed in its middle: it "
                               "resumes on the world size it was saved with (" + j["world_size"].dump() + ")");
      }
      if (saved != mix.weights) {
        return InvalidArgument("loader state's epoch changed its mixture weights once already (to " +
                               m["weights"].dump() + "); this loader's " + nlohmann::json(mix.weights).dump() +
                               " take effect from the next epoch: restore with the saved weights until then");
      }
      std::vector<ElasticStage> seg_stages;
      for (const auto& st : seg["stages"]) seg_stages.push_back({st[0].get<int>(), st[1].get<int64_t>()});
      STOKER_RETURN_IF_ERROR(PlanSegment(epoch, seg["weights"].get<std::vector<double>>(),
                                         seg.value("base_epoch", uint64_t{0}),
                                         seg.value("base_draws", std::vector<uint64_t>{}), seg_stages));
      return true;
    }
    if (saved == mix.weights || mix.law == MixLaw::kProportion) {
      mix.base_epoch = saved_base_epoch;
      mix.base_draws = saved_base;
      return false;
    }
    const bool at_start = next == 0 && stages.empty();
    if (mix.law == MixLaw::kStopAtFirst) {
      if (!at_start) {
        return InvalidArgument("loader state was saved with mixture weights " + m["weights"].dump() +
                               " in the middle of an epoch; under law stop_at_first new weights take effect at an "
                               "epoch's start (restore with the saved weights, or a state saved at an epoch's end)");
      }
      return false;  // every epoch starts fresh passes: nothing carries
    }
    LoaderOptions old = data_.options;
    old.mix.weights = saved;
    old.mix.base_epoch = saved_base_epoch;
    old.mix.base_draws = saved_base;
    if (at_start) {
      STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const MixOrder> before, MixOrder::Make(counts_, old, epoch));
      mix.base_epoch = epoch;
      mix.base_draws = before->DrawnBefore();
      return false;
    }
    stages.push_back({j["world_size"].get<int>(), next});
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const MixOrder> interrupted, MixOrder::Make(counts_, old, epoch));
    STOKER_ASSIGN_OR_RETURN(std::vector<OrderSpan> left, SpansLeft(interrupted->size(), data_.options, stages));
    if (left.empty()) {  // the epoch was delivered whole: the new weights hold from the next one
      prior_mix_ = old.mix;
      mix.base_epoch = epoch + 1;
      mix.base_draws = interrupted->DrawnAfter();
      return false;
    }
    STOKER_RETURN_IF_ERROR(PlanSegment(epoch, saved, saved_base_epoch, saved_base, stages));
    return true;
  }

  // The rest of `epoch` after `stages` of the order of weights `before`
  // (from base_epoch, base_draws), drawn by this loader's weights: this
  // rank's plan of it, adopted, and the base of the epochs after it.
  Status PlanSegment(uint64_t epoch, const std::vector<double>& before, uint64_t base_epoch,
                     const std::vector<uint64_t>& base_draws, const std::vector<ElasticStage>& stages) {
    LoaderOptions old = data_.options;
    old.mix.weights = before;
    old.mix.base_epoch = base_epoch;
    old.mix.base_draws = base_draws;
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const MixOrder> interrupted, MixOrder::Make(counts_, old, epoch));
    STOKER_ASSIGN_OR_RETURN(std::vector<OrderSpan> left, SpansLeft(interrupted->size(), data_.options, stages));
    uint64_t rest = 0;
    for (const OrderSpan& sp : left) rest += sp.count;
    if (rest == 0) return InvalidArgument("loader state's epoch has no samples left");
    MixSegment segment;
    segment.length = rest;
    const std::vector<uint64_t> reached = interrupted->DrawnAfter();
    for (size_t s = 0; s < reached.size(); ++s) {
      const uint64_t n = interrupted->source_samples()[s];
      segment.base_draws.push_back((reached[s] + n - 1) / n * n);  // a fresh pass after those reached
    }
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const MixOrder> drawn,
                            MixOrder::Make(counts_, data_.options, epoch, &segment));
    const std::vector<OrderSpan> whole = {{0, rest}};
    STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanShare(EpochOrder::Computed(counts_, drawn), whole, data_.options,
                                                      "left in this epoch"));
    plan.info.dataset_samples = static_cast<int64_t>(interrupted->size());  // the epoch's, as the state checks
    auto rank_plan = std::make_shared<const EpochPlan>(plan);
    STOKER_ASSIGN_OR_RETURN(plan, OwnBatches(std::move(plan)));
    Adopt(epoch, std::make_shared<const EpochPlan>(std::move(plan)));
    rank_plan_ = std::move(rank_plan);
    data_.options.mix.base_epoch = epoch + 1;
    data_.options.mix.base_draws = drawn->DrawnAfter();
    nlohmann::json st = nlohmann::json::array();
    for (const ElasticStage& e : stages) st.push_back({e.world_size, e.next_batch});
    segment_ = {{"weights", before}, {"base_epoch", base_epoch}, {"base_draws", base_draws}, {"stages", st}};
    return Status::Ok();
  }

  Status Plan(uint64_t epoch) {
    if (data_.tokens) {
      // One pass over the token dataset's samples (megatron's epochs are
      // inside its indices); a new epoch starts again at consumed_samples.
      STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanTokenRun(data_.tokens->size(), token_consumed_, data_.options));
      plan_ = std::make_shared<const EpochPlan>(std::move(plan));
      epoch_ = epoch;
      return Status::Ok();
    }
    STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanOwnEpoch(epoch));
    Adopt(epoch, std::make_shared<const EpochPlan>(std::move(plan)));
    return Status::Ok();
  }
  // This rank's plan of `epoch`, cut to the batches this loader makes when it
  // is one of batch_stride workers (pipeline/batch_stride.h).
  Result<EpochPlan> PlanOwnEpoch(uint64_t epoch) const {
    if (prior_mix_ && epoch < data_.options.mix.base_epoch) {  // an epoch before a mixture's weights changed
      LoaderOptions before = data_.options;
      before.mix = *prior_mix_;
      STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanEpoch(counts_, before, epoch));
      return OwnBatches(std::move(plan));
    }
    STOKER_ASSIGN_OR_RETURN(EpochPlan plan, PlanEpoch(counts_, data_.options, epoch));
    return OwnBatches(std::move(plan));
  }
  Result<EpochPlan> OwnBatches(EpochPlan plan) const {
    return StrideBatches(std::move(plan), data_.options.batch_size, data_.options.batch_stride,
                         data_.options.batch_offset, data_.options.batch_share);
  }
  // A shard loader's new epoch with its plan (planned here, or by the run ahead).
  void Adopt(uint64_t epoch, std::shared_ptr<const EpochPlan> plan) {
    plan_ = std::move(plan);
    segment_ = nullptr;  // a new epoch's weights hold from its start
    rank_plan_.reset();  // planned when a batch is received
    elastic_.clear();
    epoch_ = epoch;
    refill_.StartEpoch(epoch);
  }
  void Start() {
    stats_.RunStarted();
    if (next_batch_ < plan_->info.batches) {
      // Shard loaders prepare the next epoch's first batches as this one ends
      // (the planner is pure and its inputs fixed, so the run may call it).
      // A token run's next epoch is the same run again: not carried over.
      // Remote shards too: work prepared ahead that is not wanted (a loader
      // closed after its last epoch) is dropped promptly, a read in a retry
      // back-off or on a stalled server included (epoch_run.h, teardown).
      EpochRun::PlanMaker next;
      if (!data_.tokens) next = [this](uint64_t epoch) { return PlanOwnEpoch(epoch); };
      run_ = std::make_unique<EpochRun>(&data_, &files_, pool_, plan_, epoch_, next_batch_, std::move(next));
    }
  }

  // The controller's changes go to the running threads and to every later run.
  void Tune() {
    const int token_batch = data_.tokens ? data_.options.batch_size : 0;
    if (std::optional<TuneSettings> t = stats_.Tune([this] { return run_->ThreadCpuNs(); }, token_batch)) {
      data_.tuned = *t;
      run_->Apply(data_.tuned);
    }
  }

  Dataset data_;
  ShardFiles files_;
  SkipRefiller refill_;  // after data_ and files_, which it uses
  std::string fingerprint_;
  std::shared_ptr<BufferPool> pool_;
  EngineStats stats_;  // its recorder outlives run_, whose threads record into it
  std::vector<uint32_t> counts_;
  MixSourceNames source_names_;  // a mixture's sources by shard
  // A mixture whose weights changed in this epoch's middle: the order it
  // began with and the stages consumed of it (the state's "segment"); null otherwise.
  nlohmann::json segment_;
  // A mixture restored at an epoch's end with other weights: the weights and
  // base that epoch ran with (the new ones hold from mix.base_epoch).
  std::optional<MixOptions> prior_mix_;
  std::shared_ptr<const EpochPlan> plan_;  // shared with the run, which may have planned it
  // The rank's plan of this epoch uncut by batch_stride, for Receive; null until needed.
  std::shared_ptr<const EpochPlan> rank_plan_;
  uint64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  int64_t token_consumed_ = 0;  // token runs: the plan starts at this global sample
  std::vector<ElasticStage> elastic_;  // non-empty: this epoch resumed across world sizes
  std::unique_ptr<EpochRun> run_;  // last member: torn down first
};

// The pool holds the largest prefetch the controller may set; the run's
// prefetch gate keeps the batches made ahead at the setting in effect.
Result<std::unique_ptr<Loader>> Finish(Dataset data, TuneConfig tune, std::optional<EpochPlan> epoch0 = std::nullopt) {
  data.tuned = tune.start;
  data.tune_max = tune.max;
  auto pool = MakeBatchPool(data);
  auto loader = std::make_unique<LoaderImpl>(std::move(data), std::move(pool), std::move(tune));
  STOKER_RETURN_IF_ERROR(loader->Init(std::move(epoch0)));
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace

Result<std::unique_ptr<Loader>> CreateIndexedLoader(LoaderOptions options) {
  STOKER_RETURN_IF_ERROR(CheckBatchShare(options.batch_stride, options.batch_offset, options.batch_share));
  if (options.batch_stride > 1 && !options.tokens.paths.empty()) {
    return InvalidArgument("batch_stride > 1 is for shard loaders, not token loaders");
  }
  if (options.on_error == OnError::kSkip && options.batch_share > 0 && options.batch_share < options.batch_stride &&
      !options.leave_failed_slots) {
    // A refill comes from the rank's partition in the rank's batch order (skip_refill.h): a worker sees
    // only its batches.
    return InvalidArgument("on_error=skip with batch_stride > batch_share needs leave_failed_slots: a worker's "
                           "refills would come from its own batches, not the rank's; the loader that receives "
                           "every batch refills them");
  }
  if (!options.storage) options.storage = DefaultIoOptions();  // the environment now, not at import
  const IoOptions io = *options.storage;
  const LoaderOptions user = options;  // before auto settings resolve: which knobs the user set
  if (options.prefetch_batches < 0) {
    options.prefetch_batches = options.tokens.paths.empty() ? kDefaultPrefetch : kDefaultTokenPrefetch;
  }
  Dataset data;
  // The CPUs this process may use, not the machine's (core/cpu_share.h).
  data.cpu = CurrentCpuShare();
  const int cores = data.cpu.cores;
  // First: device="cuda" without CUDA fails before any shard is opened.
  STOKER_ASSIGN_OR_RETURN(data.device, DeviceStage::Create(options));
  if (!options.tokens.paths.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<TokenSource> tokens, TokenSource::Open(options.tokens, options.seed, io));
    // Windows from a memory map are memcpy: one reader per core, more only
    // contend (bench/autotune.py f: io 2 ahead of 4 on 2 cores; the tuner
    // adds readers when reads wait, a cold page cache). From a URL each is
    // round trips, so more of them wait at once (io_depth 16: 283 samples/s
    // at +20 ms against 38 at 2, seq 2048, batch 8).
    if (options.io_depth < 0) {
      options.io_depth = tokens->remote() ? kRemoteTokenIoDepth : std::min(kLocalIoDepth, cores);
    }
    data.layout = MakeTokenLayout(tokens->sample_tokens(), options.batch_size, tokens->blended());
    TuneConfig tune = MakeTuneConfig(user, options, data.layout, {}, tokens->remote(), /*tokens=*/true, cores);
    data.tokens = std::move(tokens);
    data.options = std::move(options);
    return Finish(std::move(data), std::move(tune));
  }
  const uint64_t index_bytes = IndexCacheBytes(options);
  STOKER_ASSIGN_OR_RETURN(ShardTables tables, options.mix.names.empty()
                                                  ? SummarizeShards(options, io, index_bytes, &data.shards)
                                                  : SummarizeMixture(options, io, index_bytes, &data.shards));
  data.parquet = tables.parquet;
  data.index_from = tables.from;
  data.remote_scanned = tables.remote_scanned;
  data.row_group_bytes = tables.row_group_bytes;
  // Each shard's key rule and field aliases: its source's (a mixture's), else the loader's.
  std::vector<std::pair<KeyRule, std::shared_ptr<const FieldAliases>>> by_source(
      std::max<size_t>(1, options.mix.shards.size()));
  for (size_t s = 0; s < by_source.size(); ++s) {
    STOKER_ASSIGN_OR_RETURN(KeyRule rule, SourceKeyRule(options, s));
    by_source[s] = {rule, SourceAliases(options, s)};
  }
  // Tables that cannot be loaded again by path (an image folder's, Parquet
  // footers) are all held from the start: a bound would drop them as they
  // are put.
  data.indexes = std::make_shared<ShardIndexCache>(
      std::move(tables.summaries),
      [first_shards = SourceFirstShards(options.mix), by_source = std::move(by_source), io](
          uint32_t shard, const ShardSummary& summary) -> Result<ShardIndex> {
        const auto& [rule, aliases] = by_source[SourceOfShard(first_shards, shard)];
        STOKER_ASSIGN_OR_RETURN(ShardIndex index, LoadOrBuildShardIndex(summary.path, rule, io, summary.bytes));
        index.samples.SetAliases(aliases);
        return index;
      },
      tables.all_held ? 0 : index_bytes);
  for (auto& [shard, index] : tables.held) data.indexes->Put(shard, std::move(index));
  const std::vector<ShardSummary>& summaries = data.indexes->summaries();
  const bool parquet = data.parquet;
  if (!parquet && !options.key_column.empty()) {
    return InvalidArgument("key_column='" + options.key_column +
                           "' names a Parquet column, but the sources are not Parquet files (" + data.shards[0] + ")");
  }
  const bool remote = std::any_of(data.shards.begin(), data.shards.end(), IsRemoteUrl);
  // The auto settings (-1) resolved once, from where the shards are: the
  // plan and the engine then see plain numbers, and options() reports them.
  // A Parquet row is read out of its decoded row group, so the order's unit
  // is a row group (pipeline/planner.h's blocks, as long as the files' row
  // groups): a global permutation of single rows would decode a row group for
  // nearly every row. The auto mix then permutes the rows of runs of such
  // blocks, held decoded together, so a file of one row group is shuffled too.
  // A mixture's sources each keep the unit a loader of it alone picks
  // (SetSourceOrders: Parquet's row groups beside tar's single samples); the
  // loader-wide unit above then sizes reads and memory.
  const LoaderOptions user_order = options;
  std::vector<bool> remote_sources;
  for (size_t s = 0, first = 0; s < options.mix.shards.size(); first += options.mix.shards[s++]) {
    const auto begin = data.shards.begin() + static_cast<std::ptrdiff_t>(first);
    remote_sources.push_back(std::any_of(begin, begin + options.mix.shards[s], IsRemoteUrl));
  }
  if (parquet && options.shuffle_block == -1) options.shuffle_block = tables.parquet_block;
  options.shuffle_block = AutoShuffleBlock(options, remote);
  const bool auto_mix = options.shuffle_mix == -1;
  options.shuffle_mix = AutoShuffleMix(options, parquet);
  SetSourceOrders(user_order, tables.source_parquet_blocks, remote_sources, options.shuffle_mix, &options.mix);
  // Where the shards' tables do not fit, the auto order is windows of shards
  // (planner.h), so the tables in use fit; with a window given, or none
  // wanted, it is what the user set.
  const bool auto_window = options.shuffle_window == -1;
  options.shuffle_window =
      tables.all_held ? std::max(0, options.shuffle_window)
                      : AutoShuffleWindow(options, tables.bytes, index_bytes, summaries.size());
  std::string order_notes;  // after the order's words (OrderInWords)
  if (auto_window && options.shuffle_window > 0) {
    order_notes += " (auto: the shards' index tables, " + std::to_string(tables.bytes >> 20) + " MiB, exceed " +
                   "index_cache_bytes " + std::to_string(index_bytes >> 20) + " MiB)";
  }
  // Every table stays where the order comes back to them all the time (a
  // permutation of the whole dataset), where they fit, or where they cannot
  // be loaded again; else the least recently used are dropped (shard_index_cache.h).
  if (tables.all_held || tables.bytes <= index_bytes || !HasLocality(options)) {
    data.indexes->SetMaxBytes(0);
  } else {
    order_notes += "; index tables loaded as the reads reach their shards";
  }
  // The first sample teaches the shapes of array fields.
  STOKER_ASSIGN_OR_RETURN(Probe probed, ProbeSample(summaries, options));
  const SampleRef probe_ref = probed.ref;
  // Its shard's open (a HEAD when remote) goes out beside its index's load.
  std::future<Result<std::unique_ptr<RandomAccessReader>>> opening =
      std::async(std::launch::async, [&] { return OpenReader(summaries[probe_ref.shard].path, io); });
  Result<std::shared_ptr<const ShardIndex>> first_index = data.indexes->Get(probe_ref.shard);
  Result<std::unique_ptr<RandomAccessReader>> opened = opening.get();
  if (!first_index.ok()) return first_index.status();
  const ShardIndex* first = first_index->get();
  SampleEntry probe_entry = first->samples[first->parquet ? 0 : probe_ref.sample].ToEntry();
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> file, std::move(opened));
  std::vector<uint8_t> probe;
  // Parquet rows go through the loader's own row cache, so the row group
  // decoded for the probe is not decoded again for the first batch (the
  // bound is set once io_depth is resolved, below).
  if (parquet) data.parquet_rows = std::make_shared<ParquetRows>(ParquetColumns(options), ParquetGroupsKept(1), io);
  if (first->parquet) {
    RowBytes row;
    STOKER_RETURN_IF_ERROR(data.parquet_rows->Read(*first, *file, 0, &row, &probe_entry));
    probe.assign(row.begin(), row.end());
  } else {
    probe.resize(probe_entry.end - probe_entry.begin);
    STOKER_RETURN_IF_ERROR(file->PRead(probe_entry.begin, probe));
  }
  STOKER_ASSIGN_OR_RETURN(data.layout, MakeBatchLayout(options.fields, options.batch_size, probe_entry, probe,
                                                       first->shard_path));
  if (options.sample_map) {  // the map's own arrays, taught by the same sample
    STOKER_RETURN_IF_ERROR(ProbeSampleMap(*options.sample_map, options.fields, probe_entry, probe, first->shard_path,
                                          MixSeed(options.seed, 0, 0), &data.layout));
  }
  STOKER_RETURN_IF_ERROR(AddGpuDecode(options, &data));
  options.io_depth = AutoIoDepth(options, data.layout, summaries, remote, data.row_group_bytes);
  if (data.gpu && user.prefetch_batches < 0) {  // deeper with GPU decode, within the memory budget
    options.prefetch_batches = GpuDecodePrefetch(options, data.layout, [&](const LoaderOptions& o) {
      return EstimateMemory(o, data.layout, summaries, data.row_group_bytes).total();
    });
  }
  if (parquet) {
    // The auto mix holds its run's row groups decoded: under a memory budget
    // that cannot, fewer of them (0: rows of a block in file order, which
    // the order's words then say), rather than a refusal. Fixed here, never
    // tuned: the order is a function of the options, and the state records it.
    const int mix = options.shuffle_mix;
    while (auto_mix && options.memory_budget > 0 && options.shuffle_mix > 0 &&
           EstimateMemory(options, data.layout, summaries, data.row_group_bytes).total() > options.memory_budget) {
      options.shuffle_mix /= 2;
    }
    if (options.shuffle_mix != mix) {
      SetSourceOrders(user_order, tables.source_parquet_blocks, remote_sources, options.shuffle_mix, &options.mix);
      probed.epoch0.reset();  // planned with the mix before: the loader plans again
    }
    // Decoded row groups kept: one per read in flight and two more, so the
    // row groups of the blocks being read stay decoded while their rows are,
    // and the mix's run (counted by EstimateMemory); the bound follows the
    // tuned reads in flight (EpochRun::Apply).
    data.parquet_rows->SetMaxGroups(ParquetGroupsKept(options.io_depth, options.shuffle_mix));
  }
  data.order = OrderInWords(options, summaries, tables.source_parquet_blocks, parquet) + order_notes;
  STOKER_RETURN_IF_ERROR(
      CheckMemoryBudget(options, EstimateMemory(options, data.layout, summaries, data.row_group_bytes)));
  TuneConfig tune =
      MakeTuneConfig(user, options, data.layout, summaries, remote, /*tokens=*/false, cores, data.row_group_bytes);
  data.options = std::move(options);
  return Finish(std::move(data), std::move(tune), std::move(probed.epoch0));
}

}  // namespace stoker
