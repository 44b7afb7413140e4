// pipeline/stream_loader.cc — see stream_loader.h.
#include "pipeline/stream_loader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/buffer_pool.h"
#include "core/cpu_share.h"
#include "io/reader.h"
#include "pipeline/batch_view.h"
#include "pipeline/dataset.h"
#include "pipeline/device_stage.h"
#include "pipeline/engine_stats.h"
#include "pipeline/map_probe.h"
#include "pipeline/memory_budget.h"
#include "pipeline/mix_seed.h"
#include "pipeline/sample_map.h"
#include "pipeline/shard_indexes.h"
#include "pipeline/source_names.h"
#include "pipeline/shuffle_buffer.h"
#include "pipeline/stream_order.h"
#include "pipeline/stream_run.h"
#include "pipeline/stream_source.h"
#include "pipeline/stream_skips.h"
#include "pipeline/tune_config.h"

namespace stoker {

namespace {

class StreamLoader : public Loader {
 public:
  StreamLoader(StreamDataset data, StreamMixOrder order, std::unique_ptr<StreamHead> head, TuneConfig tune)
      : data_(std::move(data)),
        order_(std::move(order)),
        head_(std::move(head)),
        stats_(data_.options, tune),
        skips_(&data_.options, &data_.layout),
        source_names_(data_.shards, data_.options.mix) {
    data_.recorder = stats_.recorder();
    if (data_.recorder && !data_.first_shards.empty()) data_.recorder->SetSources(data_.first_shards);
    data_.tuned = tune.start;
    data_.tune_max = tune.max;
    data_.upscales = std::make_shared<UpscaleCounter>(data_.layout.fields.size());
    const LoaderOptions& o = data_.options;
    batches_ = o.samples_per_epoch / (static_cast<int64_t>(o.world_size) * o.batch_size);
    data_.epoch_batches = std::max<int64_t>(1, batches_);
    info_.dataset_samples = o.samples_per_epoch;
    info_.batches = batches_;
    info_.rank_samples = batches_ * o.batch_size;
    info_.dropped_samples = o.samples_per_epoch - info_.rank_samples * o.world_size;
    info_.num_shards = static_cast<int64_t>(data_.shards.size());
    pool_ = MakeBatchPool(data_);
    Start();  // the first batch at once, as the indexed loader does
  }
  ~StreamLoader() override { run_.reset(); }

  Status SetEpoch(uint64_t epoch) override {
    epoch_ = epoch;
    next_batch_ = 0;
    // The run already goes on into this epoch's first batch (the one after
    // the epoch just delivered): keep it, and what it made ahead.
    if (run_ && run_->next_batch() == Along()) return Status::Ok();
    std::vector<StreamStart> from = StartFor(Along());
    run_.reset();
    Start(std::move(from));
    return Status::Ok();
  }

  Result<std::shared_ptr<Batch>> Next() override {
    bool waiting = false;
    return NextWithin(0, &waiting);
  }

  Result<std::shared_ptr<Batch>> NextWithin(int wait_ms, bool* waiting) override {
    *waiting = false;
    if (next_batch_ >= batches_) return std::shared_ptr<Batch>();
    if (!run_) Start(StartFor(Along()));
    Result<std::unique_ptr<StreamBatch>> ready =
        stats_.Wait(next_batch_, [&](auto since) { return run_->NextReady(wait_ms, since); });
    if (ready.ok() && !*ready) {
      *waiting = true;
      return std::shared_ptr<Batch>();
    }
    if (!ready.ok()) {
      resume_ = StartFor(Along());
      run_.reset();  // the stream ended in an error: a later Next starts over from here
      return source_names_.Name(ready.status());
    }
    std::unique_ptr<StreamBatch> work = std::move(ready).value();
    const int64_t index = next_batch_++;
    Tune();
    if (data_.options.on_error == OnError::kSkip) {
      if (Status st = skips_.Resolve(*work, epoch_, index); !st.ok()) return source_names_.Name(st);
    } else if (std::lock_guard lock(work->error_mu); work->error_slot >= 0) {
      return source_names_.Name(work->error);  // the lowest failed slot's
    }
    // Its device copy was issued when it became ready, unless a slot was
    // repaired since (then now, as the indexed loader copies a refilled batch).
    return Deliver(std::move(work), index, data_.layout, data_.device.get());
  }

  void Stop() override { run_.reset(); }
  const PlanInfo& plan() const override { return info_; }
  RecorderSnapshot Stats() const override { return stats_.Snapshot(data_); }
  std::string TraceJson() const override { return stats_.TraceJson(); }
  const LoaderOptions& options() const override { return data_.options; }

  std::string State() const override {
    const LoaderOptions& o = data_.options;
    // The pass the next batch's samples lie in, and its first sample (a
    // mixture's: each source's): a restore replays from there, not from the
    // stream's start.
    const std::vector<StreamStart> from = StartFor(Along());
    nlohmann::json j = {{"mode", "stream"},
                        {"epoch", epoch_},
                        {"next_batch", next_batch_},
                        {"seed", o.seed},
                        {"rank", o.rank},
                        {"world_size", o.world_size},
                        {"batch_size", o.batch_size},
                        {"samples_per_epoch", o.samples_per_epoch},
                        {"shuffle_buffer", o.shuffle ? o.shuffle_buffer : 1},
                        {"shuffle_initial", ShuffleInitial()},
                        {"shards", data_.shards.size()},
                        {"skip", skips_.ToJson()}};
    if (o.mix.names.empty()) {
      j["pass"] = from.empty() ? 0 : from[0].pass;
      j["pass_start"] = from.empty() ? 0 : from[0].position;
    } else {
      // The first weights and every change since (StreamMixOrder::Rebase): the order, replayable from its start.
      nlohmann::json changes = nlohmann::json::array();
      for (const StreamMixOrder::Change& c : order_.changes()) {
        changes.push_back({{"from", c.from}, {"weights", c.weights}});
      }
      j["mix"] = {{"names", o.mix.names}, {"weights", order_.first_weights()}, {"changes", std::move(changes)},
                  {"one_source_per_batch", o.mix.one_source_per_batch}};
      nlohmann::json passes = nlohmann::json::array();
      for (uint32_t s = 0; s < order_.num_sources(); ++s) {
        passes.push_back(from.empty() ? nlohmann::json::array({0, 0})
                                      : nlohmann::json::array({from[s].pass, from[s].position}));
      }
      j["source_passes"] = std::move(passes);
    }
    return j.dump();
  }

  Status Restore(const std::string& state) override {
    const LoaderOptions& o = data_.options;
    nlohmann::json j = nlohmann::json::parse(state, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument("loader state is not a JSON object");
    if (!j.contains("mode") || j["mode"] != "stream") {
      return InvalidArgument("loader state was saved by an indexed loader; this one streams (stream=True)");
    }
    STOKER_RETURN_IF_ERROR(CheckSavedWith(j,
                                          {{"seed", static_cast<int64_t>(o.seed)},
                                           {"rank", o.rank},
                                           {"world_size", o.world_size},
                                           {"batch_size", o.batch_size},
                                           {"samples_per_epoch", o.samples_per_epoch},
                                           {"shuffle_buffer", o.shuffle ? o.shuffle_buffer : 1},
                                           {"shards", static_cast<int64_t>(data_.shards.size())}},
                                          "the stream would differ"));
    // A state saved before the buffer ramped has no "shuffle_initial": its
    // buffer let the first sample out once full. Up to 100 samples that is
    // this one's order too.
    const int64_t initial = j.contains("shuffle_initial") && j["shuffle_initial"].is_number_integer()
                                ? j["shuffle_initial"].get<int64_t>()
                                : j["shuffle_buffer"].get<int64_t>();
    if (initial != ShuffleInitial()) {
      return InvalidArgument("loader state was saved by a stream whose shuffle buffer let its first sample out once " +
                             std::to_string(initial) + " were held; this one's does once " +
                             std::to_string(ShuffleInitial()) + " are (webdataset's ramp): the stream would differ");
    }
    for (const char* key : {"epoch", "next_batch"}) {
      if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
        return InvalidArgument(std::string("loader state lacks a non-negative integer '") + key + "'");
      }
    }
    const int64_t next = j["next_batch"].get<int64_t>();
    if (next > batches_) return InvalidArgument("loader state next_batch is out of range");
    const uint64_t target = (j["epoch"].get<uint64_t>() * static_cast<uint64_t>(batches_) +
                             static_cast<uint64_t>(next)) * static_cast<uint64_t>(o.batch_size);
    STOKER_ASSIGN_OR_RETURN(StreamMixOrder order, SavedOrder(j, target));
    std::vector<StreamStart> from;  // a state without them (older) replays from the stream's start
    STOKER_RETURN_IF_ERROR(SavedStarts(j, &from));
    for (uint32_t s = 0; s < from.size(); ++s) {
      if (from[s].position > order.DrawsBefore(s, target)) {
        return InvalidArgument("loader state's pass_start lies after its next batch");
      }
    }
    StreamSkips skips(&o, &data_.layout);
    if (j.contains("skip")) STOKER_RETURN_IF_ERROR(skips.FromJson(j["skip"]));
    run_.reset();
    skips_ = std::move(skips);
    epoch_ = j["epoch"].get<uint64_t>();
    next_batch_ = next;
    order_ = std::move(order);
    resume_ = from;
    Start(std::move(from));
    return Status::Ok();
  }

  SkipCounts Skips() const override { return skips_.counts(); }
  std::vector<SkipRecord> TakeSkipLog() override { return skips_.TakeLog(); }
  Result<std::shared_ptr<Batch>> Receive(ReceivedBatch) override {
    return FailedPrecondition("Receive is for indexed loaders; stream mode makes every batch itself");
  }
  size_t OpenShardFiles() const override { return 0; }
  std::vector<std::string> SourcesOf(const std::vector<std::string>& urls) const override {
    return source_names_.Of(urls);
  }

  LoaderSettings Settings() const override {
    const LoaderOptions& o = data_.options;
    // io_depth 1: one reading thread per rank, as webdataset (over HTTP/S3 it keeps 4 reads ahead).
    LoaderSettings s = stats_.Settings(data_);
    s.mode = "stream";
    s.stream_samples_per_epoch = o.samples_per_epoch;
    s.stream_shuffle_buffer = o.shuffle ? o.shuffle_buffer : 1;
    const bool mixture = !o.mix.names.empty();
    std::string sources;
    for (size_t i = 0; i < o.mix.names.size(); ++i) {
      char w[32];
      std::snprintf(w, sizeof w, "%.4g", o.mix.weights[i]);
      sources += (i ? ", " : "") + o.mix.names[i] + " " + w;
    }
    s.order = std::string("stream: ") +
              (mixture ? "mixture of " + std::to_string(o.mix.names.size()) + " sources by weight (" + sources +
                             "), each an endless stream of its own; " +
                             (o.mix.one_source_per_batch ? "one source per batch; "
                              : o.shuffle                ? "each batch's draws in random slots; "
                                                         : "")
                       : "") +
              (o.shuffle ? std::string(mixture ? "each source's " : "") +
                               "shards permuted each pass, then a shuffle buffer of " +
                               std::to_string(o.shuffle_buffer) + " samples (first out once " +
                               std::to_string(ShuffleInitial()) + " are held)"
                         : "shards in the order given, samples in shard order") +
              "; rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
              " reads every " + std::to_string(o.world_size) + "th shard" + (mixture ? " of each source" : "") +
              " front to back; epochs of " +
              std::to_string(o.samples_per_epoch) +
              " samples (samples_per_epoch) cut from one stream (stream=True: no index, no manifest; nothing "
              "is counted before the first batch)";
    return s;
  }
  std::vector<TuneChange> TuneLog() const override { return stats_.TuneLog(); }
  std::vector<TuneChange> TakeTuneLog() override { return stats_.TakeTuneLog(); }

 private:
  // The controller's changes go to the running threads and to every later run.
  void Tune() {
    if (std::optional<TuneSettings> t = stats_.Tune([this] { return run_->ThreadCpuNs(); })) {
      data_.tuned = *t;
      run_->Apply(data_.tuned);
    }
  }
  // The samples the stream's shuffle buffer holds before its first one out.
  int64_t ShuffleInitial() const {
    const LoaderOptions& o = data_.options;
    return static_cast<int64_t>(ShuffleBufferInitial(o.shuffle ? static_cast<size_t>(o.shuffle_buffer) : 1));
  }
  // The next batch's number along the rank's stream.
  int64_t Along() const { return static_cast<int64_t>(epoch_) * batches_ + next_batch_; }
  // Each source's latest known pass start at or before its draws before
  // batch `along`'s first sample: the running run's record, else the
  // restored state's, else (empty) the streams' starts.
  std::vector<StreamStart> StartFor(int64_t along) const {
    const uint64_t position = static_cast<uint64_t>(along) * static_cast<uint64_t>(data_.options.batch_size);
    if (run_) {
      if (std::optional<std::vector<StreamStart>> known = run_->StartsAt(position)) return *known;
    }
    for (uint32_t s = 0; s < resume_.size(); ++s) {
      if (resume_[s].position > order_.DrawsBefore(s, position)) return {};
    }
    return resume_;
  }
  void Start(std::vector<StreamStart> from = {}) {
    stats_.RunStarted();
    // The head (the first source's first shard, probed) is the first run's only, from the stream's start.
    run_ = std::make_unique<StreamRun>(&data_, pool_, order_, Along(), std::move(head_), std::move(from));
  }
  // The order a state was saved with (its mixture's first weights and their
  // changes), onto the same sources and one_source_per_batch; this loader's
  // weights, where they differ from the last saved, take effect from the
  // next batch (`target`, its first position): each source's stream goes on
  // from its draws there, under the new weights.
  Result<StreamMixOrder> SavedOrder(const nlohmann::json& j, uint64_t target) const {
    const MixOptions& mix = data_.options.mix;
    if (!j.contains("mix")) {
      if (mix.names.empty()) return order_;
      return InvalidArgument("loader state was saved by a stream of one dataset, this loader streams a mixture");
    }
    const nlohmann::json& m = j["mix"];
    if (mix.names.empty() || m.value("names", nlohmann::json()) != nlohmann::json(mix.names) ||
        m.value("one_source_per_batch", false) != mix.one_source_per_batch) {
      return InvalidArgument("loader state was saved by a stream mixture of " +
                             m.value("names", nlohmann::json()).dump() + " (one_source_per_batch " +
                             m.value("one_source_per_batch", nlohmann::json()).dump() + "), this loader streams " +
                             (mix.names.empty() ? std::string("one dataset") : nlohmann::json(mix.names).dump()) +
                             ": a stream mixture restores onto the same sources");
    }
    auto weights_of = [](const nlohmann::json& w) -> std::optional<std::vector<double>> {
      if (!w.is_array() || !std::all_of(w.begin(), w.end(), [](const nlohmann::json& x) { return x.is_number(); })) {
        return std::nullopt;
      }
      return w.get<std::vector<double>>();
    };
    LoaderOptions saved = data_.options;
    std::optional<std::vector<double>> first = weights_of(m.value("weights", nlohmann::json()));
    if (!first) return InvalidArgument("loader state's mixture has no weights");
    saved.mix.weights = *first;
    STOKER_ASSIGN_OR_RETURN(StreamMixOrder order, StreamMixOrder::Make(saved));
    std::vector<double> last = *first;
    for (const nlohmann::json& c : m.value("changes", nlohmann::json::array())) {
      std::optional<std::vector<double>> w = c.is_object() ? weights_of(c.value("weights", nlohmann::json()))
                                                          : std::nullopt;
      if (!w || !c.contains("from") || !c["from"].is_number_unsigned()) {
        return InvalidArgument("loader state's mixture changes must be {from, weights}");
      }
      STOKER_RETURN_IF_ERROR(order.Rebase(c["from"].get<uint64_t>(), *w));
      last = *w;
    }
    if (last != mix.weights) STOKER_RETURN_IF_ERROR(order.Rebase(target, mix.weights));
    return order;
  }

  // The state's pass starts, one per source (none: the streams' starts).
  Status SavedStarts(const nlohmann::json& j, std::vector<StreamStart>* from) const {
    auto start = [](const nlohmann::json& pass, const nlohmann::json& position) -> std::optional<StreamStart> {
      if (!pass.is_number_unsigned() || !position.is_number_unsigned()) return std::nullopt;
      return StreamStart{pass.get<uint64_t>(), position.get<uint64_t>()};
    };
    if (j.contains("source_passes")) {
      const nlohmann::json& all = j["source_passes"];
      if (!all.is_array() || all.size() != order_.num_sources()) {
        return InvalidArgument("loader state's 'source_passes' must hold a [pass, first draw] for each of the " +
                               std::to_string(order_.num_sources()) + " sources");
      }
      for (const nlohmann::json& p : all) {
        std::optional<StreamStart> s = p.is_array() && p.size() == 2 ? start(p[0], p[1]) : std::nullopt;
        if (!s) return InvalidArgument("loader state's 'source_passes' must be pairs of non-negative integers");
        from->push_back(*s);
      }
    } else if (j.contains("pass") || j.contains("pass_start")) {
      std::optional<StreamStart> s =
          j.contains("pass") && j.contains("pass_start") ? start(j["pass"], j["pass_start"]) : std::nullopt;
      if (!s) return InvalidArgument("loader state's 'pass' and 'pass_start' must both be non-negative integers");
      from->push_back(*s);
    }
    return Status::Ok();
  }

  // Its device stage (null for host batches) is declared before the pool,
  // which unpins through it.
  StreamDataset data_;
  StreamMixOrder order_;              // which source each position of the rank's stream draws from
  std::unique_ptr<StreamHead> head_;  // until the first run takes it
  std::vector<StreamStart> resume_;   // the restored state's pass starts (empty: the streams' starts)
  EngineStats stats_;  // its recorder outlives run_, whose threads record into it
  StreamSkips skips_;  // on_error="skip"'s counts and log
  MixSourceNames source_names_;  // a mixture's sources by shard
  int64_t batches_ = 0;  // per epoch
  PlanInfo info_;
  std::shared_ptr<BufferPool> pool_;
  uint64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::unique_ptr<StreamRun> run_;  // last member: torn down first
};

Status Refuse(const std::string& what) { return InvalidArgument("stream=True: " + what); }

// The shards, a mixture's source after source (options.mix.shards gets each
// one's count, data its first shards and the members its fields are read
// from): each source at least one shard a rank, since every rank reads whole
// shards of each.
Status ExpandStreamSources(LoaderOptions& options, StreamDataset* data) {
  MixOptions& mix = options.mix;
  const IoOptions& io = *options.storage;
  if (mix.names.empty()) {
    STOKER_ASSIGN_OR_RETURN(data->shards, ExpandSources(options.sources, io));
    if (data->shards.size() < static_cast<size_t>(options.world_size)) {
      return Refuse(std::to_string(data->shards.size()) + " shards for " + std::to_string(options.world_size) +
                    " ranks: each rank reads whole shards, so there must be at least as many shards as ranks");
    }
    return Status::Ok();
  }
  if (mix.names.size() != options.sources.size()) {
    return InvalidArgument("a mixture names " + std::to_string(mix.names.size()) + " sources for " +
                           std::to_string(options.sources.size()) + " entries of sources");
  }
  mix.shards.clear();
  for (size_t s = 0; s < mix.names.size(); ++s) {
    const std::string named = "source '" + mix.names[s] + "' of the mixture";
    Result<KeyRule> rule = SourceKeyRule(options, s);
    if (!rule.ok()) return rule.status();
    if (*rule != KeyRule::kWebDataset) return Refuse(named + ": key_rule must be 'webdataset'");
    std::shared_ptr<const FieldAliases> aliases = SourceAliases(options, s);
    STOKER_RETURN_IF_ERROR(CheckSourceAliases(options, s, aliases.get()));
    Result<std::vector<std::string>> shards = ExpandSources({options.sources[s]}, io);
    if (!shards.ok()) return shards.status().WithContext(named);
    if (shards->size() < static_cast<size_t>(options.world_size)) {
      return Refuse(named + " has " + std::to_string(shards->size()) + " shards for " +
                    std::to_string(options.world_size) + " ranks: each rank reads whole shards of each source");
    }
    data->aliases.push_back(std::move(aliases));
    mix.shards.push_back(static_cast<uint32_t>(shards->size()));
    data->shards.insert(data->shards.end(), shards->begin(), shards->end());
  }
  data->first_shards = SourceFirstShards(mix);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Loader>> CreateStreamLoader(LoaderOptions options) {
  // A mixture's length: stoker.mix(samples_per_epoch=) or the loader's, which must agree.
  if (!options.mix.names.empty() && options.mix.samples_per_epoch > 0) {
    if (options.samples_per_epoch > 0 && options.samples_per_epoch != options.mix.samples_per_epoch) {
      return Refuse("samples_per_epoch " + std::to_string(options.samples_per_epoch) + " and the mixture's " +
                    std::to_string(options.mix.samples_per_epoch) + " differ; give one");
    }
    options.samples_per_epoch = options.mix.samples_per_epoch;
  }
  if (options.samples_per_epoch <= 0) {
    return Refuse(
        "needs samples_per_epoch (webdataset's with_epoch): a stream is not counted before it is read, and "
        "every rank must deliver the same number of batches per epoch, which needs the epoch's length up front");
  }
  if (!options.tokens.paths.empty()) return Refuse("token datasets have their own order; leave stream off");
  if (options.partition != PartitionPolicy::kDropRemainder || !options.drop_last) {
    return Refuse("every rank delivers samples_per_epoch // (world_size * batch_size) full batches: "
                  "partition must be 'drop' and drop_last True");
  }
  if (options.batch_stride != 1 || options.batch_offset != 0 || options.batch_share != 1) {
    return Refuse("Ray workers share an indexed loader's batches, not a stream's");
  }
  if (options.key_rule != KeyRule::kWebDataset) return Refuse("key_rule must be 'webdataset'");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank must be in [0, world_size)");
  }
  const int64_t batches =
      options.samples_per_epoch / (static_cast<int64_t>(options.world_size) * options.batch_size);
  if (batches < 1) {
    return Refuse("samples_per_epoch " + std::to_string(options.samples_per_epoch) +
                  " is less than one batch per rank (" + std::to_string(options.world_size) + " ranks x batch_size " +
                  std::to_string(options.batch_size) + ")");
  }
  if (!options.storage) options.storage = DefaultIoOptions();
  StreamDataset data;
  STOKER_ASSIGN_OR_RETURN(StreamMixOrder order, StreamMixOrder::Make(options));
  STOKER_RETURN_IF_ERROR(ExpandStreamSources(options, &data));
  for (const std::string& s : data.shards) {
    if (s.ends_with(".parquet")) return Refuse("streams tar shards; " + s + " is a Parquet file");
    if (!IsRemoteUrl(s) && std::filesystem::is_directory(s)) {
      return Refuse("streams tar shards; " + s + " is a folder (an image folder has no stream order)");
    }
  }
  const LoaderOptions user = options;  // as given: a knob passed stays fixed (tune_config.h)
  data.cpu = CurrentCpuShare();
  if (options.decode_threads <= 0) options.decode_threads = data.cpu.cores;
  if (options.prefetch_batches < 1) options.prefetch_batches = kDefaultPrefetch;
  // device="cuda" without CUDA fails before any shard is opened, as the indexed loader does.
  STOKER_ASSIGN_OR_RETURN(data.device, DeviceStage::Create(options));
  if (options.shuffle && options.shuffle_buffer <= 0) options.shuffle_buffer = kDefaultStreamShuffleBuffer;
  // The first sample of the rank's first shard (a mixture's: its first
  // source's) teaches the shapes of array fields; the first run goes on
  // reading that shard from there (StreamHead).
  const uint32_t first_source_shards =
      options.mix.shards.empty() ? static_cast<uint32_t>(data.shards.size()) : options.mix.shards[0];
  const uint32_t first = StreamPassShards(StreamSourceSeed(options, 0), 0, first_source_shards, options.rank,
                                          options.world_size, options.shuffle)
                             .front();
  auto head = std::make_unique<StreamHead>();
  STOKER_ASSIGN_OR_RETURN(head->shard, ShardStream::Open(data.shards[first], first, *options.storage, /*first=*/true));
  STOKER_ASSIGN_OR_RETURN(head->first, head->shard->Next());
  if (!head->first) return Refuse(data.shards[first] + " holds no samples (the rank's first shard)");
  SampleEntry probe = head->first->Entry();
  if (!data.aliases.empty()) probe.aliases = data.aliases[0];
  STOKER_ASSIGN_OR_RETURN(data.layout, MakeBatchLayout(options.fields, options.batch_size, probe,
                                                       head->first->data(), data.shards[first]));
  if (options.sample_map) {  // the map's own arrays, taught by the same sample
    STOKER_RETURN_IF_ERROR(ProbeSampleMap(*options.sample_map, options.fields, probe, head->first->data(),
                                          data.shards[first], MixSeed(options.seed, 0, 0), &data.layout));
  }
  STOKER_RETURN_IF_ERROR(AddGpuDecode(options, &data));
  // Judged as the indexed mode judges it (memory_budget.h), with the first
  // sample's size for the largest, which no index gives.
  const uint64_t first_bytes = head->first->data().size();
  const uint64_t window_bytes = head->shard->window_bytes();
  if (data.gpu && user.prefetch_batches < 0) {  // deeper with GPU decode, within the memory budget
    options.prefetch_batches = GpuDecodePrefetch(options, data.layout, [&](const LoaderOptions& o) {
      return EstimateStreamMemory(o, data.layout, first_bytes, window_bytes).total();
    });
  }
  STOKER_RETURN_IF_ERROR(CheckMemoryBudget(
      options, EstimateStreamMemory(options, data.layout, first_bytes, window_bytes),
      "samples estimated at the stream's first, " + std::to_string(first_bytes) + " bytes, and a shuffle buffer of " +
          std::to_string(options.shuffle_buffer)));
  TuneConfig tune = MakeStreamTuneConfig(user, options, data.layout, first_bytes, window_bytes, data.cpu.cores);
  data.options = std::move(options);
  return std::unique_ptr<Loader>(std::make_unique<StreamLoader>(std::move(data), std::move(order), std::move(head),
                                                                std::move(tune)));
}

}  // namespace stoker
