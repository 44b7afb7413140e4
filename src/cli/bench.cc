// cli/bench.cc — `stoker bench SOURCES... --field jpg:image:224 ...`: runs a
// stoker::Loader over shards and reports its throughput: samples/s, MB/s of
// shard bytes behind the delivered samples, batches, time to first batch and
// the consumer's wait per Next(). Nothing is done with the batches, so this
// measures the loader alone, the ceiling a training loop can reach.
//
// Field spec grammar: see cli/field_spec.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/field_spec.h"
#include "pipeline/image_folder.h"
#include "pipeline/shard_indexes.h"
#include "stoker/loader.h"

namespace stoker::cli {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct BenchOptions {
  std::vector<std::string> sources;
  std::vector<std::string> fields;
  std::string key_rule = "auto";
  int batch_size = 64;
  int decode_threads = 0;
  int io_depth = 4;
  int prefetch = 2;
  int epochs = 2;
  int64_t max_batches = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  bool json = false;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

Status RunBench(const BenchOptions& opt) {
  LoaderOptions lo;
  STOKER_RETURN_IF_ERROR(ConfigureLoader(opt.sources, opt.fields, opt.key_rule, &lo));
  // An image folder's "shards" are its files (pipeline/image_folder.h).
  std::vector<std::string> shards = lo.sources;
  std::vector<ShardIndex> indexes;
  if (IsImageFolderSource(lo.sources)) {
    shards.clear();
    STOKER_RETURN_IF_ERROR(ImageFolderShards(lo.sources[0], &shards, &indexes));
  } else {  // tar shards or Parquet files, as the loader reads them
    STOKER_ASSIGN_OR_RETURN(indexes, LoadShardIndexes(shards, lo.key_rule, DefaultIoOptions()));
  }
  // Bytes behind each sample ("shard:key" as Batch::keys() names it), for MB/s.
  std::unordered_map<std::string, uint64_t> sample_bytes;
  uint64_t dataset_bytes = 0;
  for (size_t i = 0; i < indexes.size(); ++i) {
    for (SampleView s : indexes[i].samples) {
      sample_bytes[shards[i] + ":" + std::string(s.key)] = s.end - s.begin;
      dataset_bytes += s.end - s.begin;
    }
  }
  const double mean_sample_bytes = sample_bytes.empty() ? 0 : double(dataset_bytes) / sample_bytes.size();

  lo.batch_size = opt.batch_size;
  lo.decode_threads = opt.decode_threads;
  lo.io_depth = opt.io_depth;
  lo.prefetch_batches = opt.prefetch;
  lo.shuffle = opt.shuffle;
  lo.seed = opt.seed;
  lo.include_keys = true;
  const auto create_start = Clock::now();
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::Create(lo));
  const double create_s = Seconds(Clock::now() - create_start);
  const PlanInfo& plan = loader->plan();

  nlohmann::ordered_json report;
  report["shards"] = shards.size();
  report["dataset_samples"] = plan.dataset_samples;
  report["batches_per_epoch"] = plan.batches;
  report["config"] = {{"batch_size", opt.batch_size}, {"decode_threads", opt.decode_threads},
                      {"io_depth", opt.io_depth},     {"prefetch", opt.prefetch},
                      {"shuffle", opt.shuffle},       {"key_rule", KeyRuleName(lo.key_rule)},
                      {"fields", opt.fields}};
  report["create_s"] = create_s;
  report["epochs"] = nlohmann::ordered_json::array();
  if (!opt.json) {
    const std::string threads = opt.decode_threads > 0 ? std::to_string(opt.decode_threads) : "auto";
    std::printf("bench: %zu shard%s, %lld samples, %lld batches/epoch of %d; decode threads %s, io depth %d, "
                "prefetch %d; loader created in %.3f s\n",
                shards.size(), shards.size() == 1 ? "" : "s", (long long)plan.dataset_samples,
                (long long)plan.batches, opt.batch_size, threads.c_str(), opt.io_depth, opt.prefetch, create_s);
  }

  std::vector<double> waits;  // seconds per Next(), all epochs
  int64_t all_samples = 0, all_batches = 0;
  double all_bytes = 0, all_secs = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const auto start = Clock::now();
    STOKER_RETURN_IF_ERROR(loader->SetEpoch(epoch));
    int64_t batches = 0, samples = 0;
    double bytes = 0, first_batch_s = 0;
    while (opt.max_batches == 0 || batches < opt.max_batches) {
      const auto before = Clock::now();
      STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
      const auto after = Clock::now();
      if (!batch) break;
      waits.push_back(Seconds(after - before));
      if (batches == 0) first_batch_s = Seconds(after - start);
      ++batches;
      samples += batch->size();
      for (const std::string& key : batch->keys()) {
        auto it = sample_bytes.find(key);
        bytes += it != sample_bytes.end() ? double(it->second) : mean_sample_bytes;
      }
      if (batch->keys().empty()) bytes += mean_sample_bytes * batch->size();
    }
    const double secs = Seconds(Clock::now() - start);
    all_samples += samples, all_batches += batches, all_bytes += bytes, all_secs += secs;
    report["epochs"].push_back({{"epoch", epoch}, {"batches", batches}, {"samples", samples}, {"seconds", secs},
                                {"samples_per_s", samples / secs}, {"mb_per_s", bytes / 1e6 / secs},
                                {"first_batch_s", first_batch_s}});
    if (!opt.json) {
      std::printf("epoch %d: %lld batches, %lld samples in %.2f s: %.1f samples/s, %.1f MB/s, first batch %.3f s\n",
                  epoch, (long long)batches, (long long)samples, secs, samples / secs, bytes / 1e6 / secs,
                  first_batch_s);
    }
  }
  const double p50 = Percentile(waits, 0.5) * 1e3, p99 = Percentile(waits, 0.99) * 1e3;
  const double rate = all_secs > 0 ? all_samples / all_secs : 0, mbps = all_secs > 0 ? all_bytes / 1e6 / all_secs : 0;
  report["total"] = {{"batches", all_batches}, {"samples", all_samples}, {"seconds", all_secs},
                     {"samples_per_s", rate}, {"mb_per_s", mbps}, {"wait_ms_p50", p50}, {"wait_ms_p99", p99}};
  if (opt.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("total: %lld batches, %lld samples in %.2f s: %.1f samples/s, %.1f MB/s; Next() wait p50 %.2f ms, "
                "p99 %.2f ms\n",
                (long long)all_batches, (long long)all_samples, all_secs, rate, mbps, p50, p99);
  }
  return Status::Ok();
}

}  // namespace

void RegisterBench(CLI::App& app, Status* status) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure loader throughput over tar shards");
  cmd->add_option("SOURCES", opt->sources, "shards: paths, brace ranges a-{000..031}.tar, globs, .txt lists")
      ->required();
  cmd->add_option("-f,--field", opt->fields, "FIELD:KIND[:ARGS], e.g. jpg:image:224, features.npz:npz, cls:scalar:int64, txt:text (none: inferred)")
      ->allow_extra_args(false);  // one spec per --field, so SOURCES may follow
  cmd->add_option("--key-rule", opt->key_rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_option("-b,--batch-size", opt->batch_size, "samples per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--decode-threads", opt->decode_threads, "0: one per core of the job's share (affinity, cgroup quota, ranks on the host), as the loader counts them")->capture_default_str();
  cmd->add_option("--io-depth", opt->io_depth, "concurrent reads")->capture_default_str();
  cmd->add_option("--prefetch", opt->prefetch, "batches decoded ahead")->capture_default_str();
  cmd->add_option("--epochs", opt->epochs, "epochs to run")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-batches", opt->max_batches, "stop each epoch after this many batches (0: all)");
  cmd->add_flag("--shuffle", opt->shuffle, "shuffled order (global permutation)");
  cmd->add_option("--seed", opt->seed, "shuffle seed")->capture_default_str();
  cmd->add_flag("--json", opt->json, "one JSON object on stdout");
  cmd->callback([=] { *status = RunBench(*opt); });
}

}  // namespace stoker::cli
