// cli/doctor.cc — `stoker doctor SOURCES... -f FIELD... --step-ms T`: says
// whether a dataset can feed a training step, which stage would starve it,
// and what configuration to run.
//
// It measures, in this order (each step's figures are independent of the
// next, so a later step never pollutes an earlier one):
//   1. tar/index overhead: header scan and sidecar load per shard;
//   2. page-cache residency of the shards before anything reads them;
//   3. cold storage: the shards' pages dropped (posix_fadvise DONTNEED, then
//      checked with mincore), sequential then sample-sized random reads; if
//      the drop did not take, the figures are labelled page-cache figures;
//   4. hot page cache: the same reads once the shards are resident;
//   5. decode cost per sample on one core: a Loader with one decoder, its
//      decode busy time over items (the real SampleDecoder path);
//   6. the pipeline at its defaults, full speed, with the stage counters
//      naming the bottleneck (observe/probes.h Diagnose);
//   7. the recommended configuration (observe/probes.h Recommend, from the
//      per-sample costs alone, no search), then a run of it to measure it.
// The doctor changes the page cache (it drops the shards' pages and reads
// them back); it says so, and leaves them resident when they fit in memory.
//
// --max-read-mbps simulates slower storage: the loader runs share that
// bandwidth (LoaderOptions::max_read_bytes_per_s) and the storage figures are
// capped at it, so the diagnosis of a storage-bound job can be rehearsed.
// A single folder as SOURCE (loose files) gets the storage half only, and
// the advice to pack it.
// Thread-safety: a command; runs on the main thread (the loaders it creates
// run their own threads).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/field_spec.h"
#include "core/cpu_share.h"
#include "formats/parquet_file.h"
#include "formats/sample_index.h"
#include "formats/tar.h"
#include "io/reader.h"
#include "observe/histogram.h"
#include "observe/probes.h"
#include "pipeline/tune_config.h"
#include "stoker/loader.h"

namespace stoker::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct DoctorOptions {
  std::vector<std::string> sources;
  std::vector<std::string> fields;
  std::string key_rule = "auto";
  double step_ms = 0;
  int batch_size = 32;
  double budget_mb = 1024;
  double max_read_mbps = 0;   // 0: storage as it is
  double run_seconds = 2.0;   // each pipeline run
  bool shuffle = false;
  bool json = false;
};

// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
uint64_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

double ProcessCpuSeconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

Json ProbeJson(const probes::ReadProbe& p) {
  return {{"reads", p.reads},
          {"bytes", p.bytes},
          {"seconds", p.seconds},
          {"bytes_per_s", p.BytesPerSecond()},
          {"latency_mean_s", p.reads ? p.seconds / p.reads : 0},
          {"latency_p50_s", p.LatencyQuantile(0.5)},
          {"latency_p99_s", p.LatencyQuantile(0.99)}};
}

// One loader run at full speed: the consumer takes batches as fast as they
// come. The first batch (pipeline fill, shard opens) is not counted.
struct RunResult {
  probes::RunEvidence evidence;
  double batch_bytes_per_sample = 0;  // all arrays of a batch over its samples
  double wait_p50_s = 0, wait_p99_s = 0;
  std::vector<uint64_t> read_latency;
};

Result<RunResult> RunLoader(const LoaderOptions& lo, double seconds, uint64_t min_samples) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::Create(lo));
  RunResult out;
  uint64_t epoch = 0;
  STOKER_RETURN_IF_ERROR(loader->SetEpoch(epoch));
  {
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Batch> first, loader->Next());
    if (!first) return FailedPrecondition("the dataset has no full batch of " + std::to_string(lo.batch_size));
    size_t bytes = 0;
    for (const ArrayView& a : first->arrays()) bytes += a.nbytes;
    out.batch_bytes_per_sample = double(bytes) / std::max(1, first->size());
  }
  const RecorderSnapshot s0 = loader->Stats();
  const double cpu0 = ProcessCpuSeconds();
  const auto start = Clock::now();
  std::vector<double> waits;
  uint64_t samples = 0;
  while (Seconds(Clock::now() - start) < seconds || samples < min_samples) {
    const auto before = Clock::now();
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
    if (!batch) {
      STOKER_RETURN_IF_ERROR(loader->SetEpoch(++epoch));
      continue;
    }
    waits.push_back(Seconds(Clock::now() - before));
    samples += static_cast<uint64_t>(batch->size());
  }
  const double wall = Seconds(Clock::now() - start);
  const RecorderSnapshot s1 = loader->Stats();
  probes::RunEvidence& e = out.evidence;
  e.cpu_s = ProcessCpuSeconds() - cpu0;
  e.wall_s = wall;
  e.samples = samples;
  e.io_depth = s1.io_depth;
  e.decode_threads = s1.decode_threads;
  e.cores = CurrentCpuShare().cores;  // the job's CPUs (core/cpu_share.h), as the loader counts them
  e.read_busy_s = s1.read.busy_s - s0.read.busy_s;
  e.decode_busy_s = s1.decode.busy_s - s0.decode.busy_s;
  e.decode_get_wait_s = s1.decode_queue_get_wait_s - s0.decode_queue_get_wait_s;
  e.decode_put_wait_s = s1.decode_queue_put_wait_s - s0.decode_queue_put_wait_s;
  e.pool_wait_s = s1.pool_wait_s - s0.pool_wait_s;
  e.consumer_wait_s = s1.consumer_wait_s - s0.consumer_wait_s;
  out.read_latency = s1.read_latency;
  for (size_t i = 0; i < out.read_latency.size() && i < s0.read_latency.size(); ++i) {
    out.read_latency[i] -= s0.read_latency[i];
  }
  if (!waits.empty()) {
    std::sort(waits.begin(), waits.end());
    out.wait_p50_s = waits[waits.size() / 2];
    out.wait_p99_s = waits[std::min(waits.size() - 1, size_t(0.99 * (waits.size() - 1) + 0.5))];
  }
  return out;
}

Json RunJson(const RunResult& r, const LoaderOptions& lo, const probes::Diagnosis* d) {
  const probes::RunEvidence& e = r.evidence;
  Json j = {{"config", {{"io_depth", e.io_depth}, {"decode_threads", e.decode_threads},
                        {"prefetch_batches", lo.prefetch_batches}, {"batch_size", lo.batch_size}}},
            {"seconds", e.wall_s},
            {"samples", e.samples},
            {"samples_per_s", e.Rate()},
            {"read_busy_s", e.read_busy_s},
            {"decode_busy_s", e.decode_busy_s},
            {"decode_queue_get_wait_s", e.decode_get_wait_s},
            {"decode_queue_put_wait_s", e.decode_put_wait_s},
            {"pool_wait_s", e.pool_wait_s},
            {"consumer_wait_s", e.consumer_wait_s},
            {"next_wait_p50_s", r.wait_p50_s},
            {"next_wait_p99_s", r.wait_p99_s},
            {"read_latency_p50_s", LatencyHistogram::Percentile(r.read_latency, 0.5)},
            {"read_latency_p99_s", LatencyHistogram::Percentile(r.read_latency, 0.99)}};
  if (d) {
    j["bottleneck"] = probes::BottleneckName(d->bottleneck);
    j["reason"] = d->reason;
    j["read_utilisation"] = d->read_utilisation;
    j["decode_utilisation"] = d->decode_utilisation;
    j["decoder_starved"] = d->decoder_starved;
    j["readers_blocked"] = d->readers_blocked;
    j["cpu_cores_used"] = d->cpu_cores_used;
  }
  return j;
}

std::string Rate(double bytes_per_s) { return FormatBytes(bytes_per_s) + "/s"; }

// A folder of loose files: no loader runs over it (the loader reads shards),
// but its storage cost per file is measured beside what the same bytes read
// sequentially would give, which is what packing them into shards buys.
Status RunLooseDoctor(const DoctorOptions& opt, const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().filename().string().front() != '.') files.push_back(it->path());
  }
  if (ec) return IoError(dir + ": " + ec.message());
  if (files.empty()) return NotFound(dir + ": no files");
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  STOKER_ASSIGN_OR_RETURN(probes::Residency before, probes::FilesResidency(files));
  auto drop_all = [&]() -> Result<probes::Residency> {
    for (const std::string& f : files) STOKER_RETURN_IF_ERROR(probes::DropFromPageCache(f));
    return probes::FilesResidency(files);
  };
  STOKER_ASSIGN_OR_RETURN(probes::Residency dropped1, drop_all());
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe cold_files, probes::WholeFileReads(files, {256ull << 20, 2.0}, 1));
  STOKER_ASSIGN_OR_RETURN(probes::Residency dropped2, drop_all());
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe cold_seq, probes::SequentialRead(files, 1 << 20, {256ull << 20, 2.0}));
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe hot_files, probes::WholeFileReads(files, {256ull << 20, 1.0}, 2));
  const bool dropped = dropped1.Fraction() <= 0.05 && dropped2.Fraction() <= 0.05;
  const double mean_file = double(before.bytes) / files.size();
  const double files_per_s = cold_files.seconds > 0 ? cold_files.reads / cold_files.seconds : 0;
  const double packed_per_s = mean_file > 0 ? cold_seq.BytesPerSecond() / mean_file : 0;
  Json report;
  report["verdict"] = {{"layout", "loose"},
                       {"suggest", "stoker pack " + dir + " OUT/prefix"},
                       {"loose_files_per_s", files_per_s},
                       {"sequential_files_per_s", packed_per_s}};
  report["dataset"] = {{"files", files.size()}, {"bytes", before.bytes}, {"file_bytes", mean_file}};
  report["page_cache"] = {{"resident_before", before.Fraction()}, {"drop_worked", dropped}};
  report["storage"] = {{"label", dropped ? "cold" : "page-cache (drop refused)"},
                       {"whole_files", ProbeJson(cold_files)},
                       {"sequential", ProbeJson(cold_seq)}};
  report["hot"] = {{"whole_files", ProbeJson(hot_files)}};
  if (opt.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("verdict: LOOSE FILES: one open+read per sample gives %.0f files/s from storage; the same bytes read "
              "in order give %.0f/s. Pack them: stoker pack %s OUT/prefix, then run the doctor on the shards.\n",
              files_per_s, packed_per_s, dir.c_str());
  std::printf("\ndataset        %zu files, %s (%s/file)\n", files.size(), FormatBytes(double(before.bytes)).c_str(),
              FormatBytes(mean_file).c_str());
  std::printf("page cache     %.0f%% resident before; drop %s\n", before.Fraction() * 100,
              dropped ? "worked" : "REFUSED (figures are page-cache figures)");
  std::printf("storage        whole files %s (p50 %.2f ms, p99 %.2f ms per file), sequential %s [%s]\n",
              Rate(cold_files.BytesPerSecond()).c_str(), cold_files.LatencyQuantile(0.5) * 1e3,
              cold_files.LatencyQuantile(0.99) * 1e3, Rate(cold_seq.BytesPerSecond()).c_str(),
              dropped ? "cold" : "page-cache");
  std::printf("page-cache rd  whole files %.0f files/s\n", hot_files.seconds > 0 ? hot_files.reads / hot_files.seconds : 0);
  return Status::Ok();
}

Status RunDoctor(const DoctorOptions& opt) {
  if (std::any_of(opt.sources.begin(), opt.sources.end(), [](const std::string& s) { return IsRemoteUrl(s); })) {
    return RunRemoteDoctor(opt.sources, opt.json, opt.run_seconds);
  }
  if (opt.sources.size() == 1 && std::filesystem::is_directory(opt.sources.front())) {
    return RunLooseDoctor(opt, opt.sources.front());
  }
  // The CPUs this process may use, counted as the loader counts them: its
  // mask, the cgroup quota and the node's ranks (core/cpu_share.h).
  const CpuShare cpu_share = CurrentCpuShare();
  const int cores = cpu_share.cores;
  const uint64_t throttle = static_cast<uint64_t>(opt.max_read_mbps * 1e6);
  LoaderOptions base;
  STOKER_RETURN_IF_ERROR(ConfigureLoader(opt.sources, opt.fields, opt.key_rule, &base));
  const std::vector<std::string>& shards = base.sources;
  base.batch_size = opt.batch_size;
  base.shuffle = opt.shuffle;
  base.max_read_bytes_per_s = throttle;
  // The doctor compares fixed settings side by side: the controller stays out.
  base.autotune = false;
  base.prefetch_batches = kDefaultPrefetch;
  auto progress = [&](const char* what) {
    if (!opt.json) std::fprintf(stderr, "doctor: %s...\n", what);
  };

  // 2 before 1: residency must be taken before the index step reads headers.
  progress("page-cache residency");
  STOKER_ASSIGN_OR_RETURN(probes::Residency before, probes::FilesResidency(shards));

  // 1. Index overhead: the header walk every loader without a sidecar pays,
  // and the sidecar load that replaces it.
  progress("shard indexes (tar headers, sidecars, Parquet footers)");
  double scan_s = 0, load_s = 0;
  uint64_t members = 0, samples = 0, sample_bytes_total = 0;
  int sidecars = 0;
  for (const std::string& shard : shards) {
    auto t = Clock::now();
    const bool parquet = IsParquetPath(shard);  // its index is its footer: no headers to walk
    if (!parquet) {
      STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> list, ScanTar(shard));
      scan_s += Seconds(Clock::now() - t);
      members += list.size();
      struct stat st;
      sidecars += ::stat(IndexPathFor(shard).c_str(), &st) == 0;
      t = Clock::now();
    }
    STOKER_ASSIGN_OR_RETURN(ShardIndex index,
                            parquet ? LoadParquetIndex(shard) : LoadOrBuildShardIndex(shard, base.key_rule));
    load_s += Seconds(Clock::now() - t);
    samples += index.samples.size();
    for (SampleView s : index.samples) sample_bytes_total += s.end - s.begin;
  }
  if (samples == 0) return NotFound("the shards hold no samples");
  const double sample_bytes = double(sample_bytes_total) / samples;

  // 3. Cold storage. Every read probe starts from a drop so that neither
  // sees the other's pages.
  progress("cold storage reads (page cache dropped)");
  auto drop_all = [&]() -> Result<probes::Residency> {
    for (const std::string& s : shards) STOKER_RETURN_IF_ERROR(probes::DropFromPageCache(s));
    return probes::FilesResidency(shards);
  };
  STOKER_ASSIGN_OR_RETURN(probes::Residency after_drop, drop_all());
  // A few pages may come back at once (another reader); 5% is still cold.
  const bool dropped = after_drop.Fraction() <= 0.05;
  probes::ReadLimits cold_limits{256ull << 20, 2.0};
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe cold_seq, probes::SequentialRead(shards, 1 << 20, cold_limits));
  STOKER_ASSIGN_OR_RETURN(probes::Residency after_drop2, drop_all());
  const bool dropped2 = after_drop2.Fraction() <= 0.05;
  probes::ReadLimits random_limits{64ull << 20, 1.5};
  const size_t read_size = std::max<size_t>(512, static_cast<size_t>(sample_bytes));
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe cold_rand, probes::RandomRead(shards, read_size, random_limits, 1));

  // 4. Hot: read the shards in (when they fit), then measure again.
  progress("page-cache reads");
  const uint64_t available = MemAvailable();
  const bool fits = available == 0 || before.bytes <= available / 2;
  if (fits) {
    STOKER_RETURN_IF_ERROR(probes::SequentialRead(shards, 1 << 20, {~0ull, 1e9}).status());
  }
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe hot_seq, probes::SequentialRead(shards, 1 << 20, {1ull << 30, 1.0}));
  STOKER_ASSIGN_OR_RETURN(probes::ReadProbe hot_rand, probes::RandomRead(shards, read_size, {1ull << 30, 0.5}, 2));
  STOKER_ASSIGN_OR_RETURN(probes::Residency after_hot, probes::FilesResidency(shards));

  // 5. Decode cost on one core, through the loader's own decode path.
  progress("decode cost on one core");
  LoaderOptions one = base;
  one.decode_threads = 1, one.io_depth = 1, one.prefetch_batches = 2, one.max_read_bytes_per_s = 0;
  one.batch_size = static_cast<int>(std::min<uint64_t>(opt.batch_size, std::max<uint64_t>(1, samples / 4)));
  STOKER_ASSIGN_OR_RETURN(RunResult single, RunLoader(one, 1.0, std::min<uint64_t>(samples, 200)));
  const double decode_s = single.evidence.decode_busy_s / std::max<uint64_t>(1, single.evidence.samples);

  // 6. The defaults, at full speed, diagnosed from the stage counters.
  progress("pipeline with the default configuration");
  probes::Costs costs;
  costs.cores = cores;
  costs.decode_s = decode_s;
  costs.sample_bytes = sample_bytes;
  costs.batch_size = opt.batch_size;
  costs.step_s = opt.step_ms / 1e3;
  costs.budget_bytes = static_cast<uint64_t>(opt.budget_mb * 1e6);
  const double required = probes::RequiredRate(costs);
  STOKER_ASSIGN_OR_RETURN(RunResult defaults, RunLoader(base, opt.run_seconds, 0));
  const probes::Diagnosis diagnosis = probes::Diagnose(defaults.evidence, required);

  // Where the samples come from in steady training: the page cache when the
  // dataset fits in memory (after the first epoch), the storage otherwise —
  // sequential in shard order, random when shuffled by global permutation.
  const bool hot_regime = fits && after_hot.Fraction() >= 0.95;
  const probes::ReadProbe& regime =
      hot_regime ? (opt.shuffle ? hot_rand : hot_seq) : (opt.shuffle ? cold_rand : cold_seq);
  costs.storage_bytes_per_s = regime.BytesPerSecond();
  costs.read_latency_s = opt.shuffle || hot_regime
                             ? (hot_regime ? hot_rand : cold_rand).seconds /
                                   std::max<uint64_t>(1, (hot_regime ? hot_rand : cold_rand).reads)
                             : sample_bytes / std::max(1.0, cold_seq.BytesPerSecond());
  costs.read_latency_p99_s = (hot_regime ? hot_rand : cold_rand).LatencyQuantile(0.99);
  costs.read_cpu_s = hot_rand.reads ? hot_rand.seconds / hot_rand.reads : 0;
  if (throttle > 0) {
    costs.storage_bytes_per_s = std::min(costs.storage_bytes_per_s, double(throttle));
    costs.read_latency_s = std::max(costs.read_latency_s, sample_bytes / double(throttle));
  }
  costs.batch_bytes_per_sample = defaults.batch_bytes_per_sample;
  // The defaults run one decoder per core at full speed: the CPU the process
  // got then is what this machine lends it now.
  costs.cores_available = std::clamp(diagnosis.cpu_cores_used, 0.1, double(cores));

  // 7. The recommendation, from the costs alone; then measured.
  progress("pipeline with the recommended configuration");
  const probes::Recommendation rec = probes::Recommend(costs);
  LoaderOptions chosen = base;
  chosen.io_depth = rec.io_depth;
  chosen.decode_threads = rec.decode_threads;
  chosen.prefetch_batches = rec.prefetch_batches;
  STOKER_ASSIGN_OR_RETURN(RunResult measured, RunLoader(chosen, opt.run_seconds, 0));
  const probes::Diagnosis chosen_diag = probes::Diagnose(measured.evidence, required);
  const probes::Prediction default_pred =
      probes::Predict(costs, defaults.evidence.io_depth, defaults.evidence.decode_threads);
  const double measured_rate = measured.evidence.Rate();
  const bool step_met = required > 0 && measured_rate >= required;
  // Per step the GPU would wait for what the input cannot make in time.
  const double wait_per_step = required > 0 && measured_rate > 0
                                   ? std::max(0.0, opt.batch_size / measured_rate - costs.step_s)
                                   : 0;
  // The headline bottleneck: what limits the recommended configuration (the
  // defaults' diagnosis is reported beside it).
  const probes::Bottleneck verdict = chosen_diag.bottleneck;

  Json report;
  report["verdict"] = {{"bottleneck", probes::BottleneckName(verdict)},
                       {"reason", chosen_diag.reason},
                       {"step_met", step_met},
                       {"required_samples_per_s", required},
                       {"measured_samples_per_s", measured_rate},
                       {"predicted_samples_per_s", rec.predicted.rate},
                       {"wait_per_step_s", wait_per_step}};
  report["recommended"] = {{"io_depth", rec.io_depth},
                           {"decode_threads", rec.decode_threads},
                           {"prefetch_batches", rec.prefetch_batches},
                           {"batch_size", opt.batch_size},
                           {"max_batch_size", rec.max_batch_size},
                           {"batch_fits_budget", rec.batch_fits},
                           {"budget_bytes", costs.budget_bytes},
                           {"notes", rec.notes}};
  report["dataset"] = {{"shards", shards.size()},   {"samples", samples},
                       {"members", members},        {"bytes", before.bytes},
                       {"sample_bytes", sample_bytes}, {"batch_bytes_per_sample", costs.batch_bytes_per_sample},
                       {"fields", opt.fields},      {"key_rule", KeyRuleName(base.key_rule)}};
  report["machine"] = {{"cores", cores}, {"cores_from", cpu_share.ToString()},
                       {"cores_available", costs.cores_available},
                       {"mem_available_bytes", available}};
  report["page_cache"] = {{"resident_before", before.Fraction()},
                          {"resident_after_drop", after_drop.Fraction()},
                          {"resident_after_second_drop", after_drop2.Fraction()},
                          {"drop_worked", dropped && dropped2},
                          {"resident_after_doctor", after_hot.Fraction()},
                          {"fits_in_memory", fits}};
  report["storage"] = {{"label", dropped && dropped2 ? "cold" : "page-cache (drop refused)"},
                       {"sequential", ProbeJson(cold_seq)},
                       {"random", ProbeJson(cold_rand)},
                       {"random_read_bytes", read_size},
                       {"max_read_bytes_per_s", throttle}};
  report["hot"] = {{"sequential", ProbeJson(hot_seq)}, {"random", ProbeJson(hot_rand)}};
  report["decode"] = {{"s_per_sample_per_core", decode_s},
                      {"samples_per_s_per_core", decode_s > 0 ? 1 / decode_s : 0},
                      {"samples", single.evidence.samples}};
  report["index"] = {{"tar_scan_s_per_shard", scan_s / shards.size()},
                     {"members_per_s", scan_s > 0 ? members / scan_s : 0},
                     {"index_load_s_per_shard", load_s / shards.size()},
                     {"sidecars", sidecars}};
  report["costs"] = {{"regime", hot_regime ? "page cache" : "storage"},
                     {"storage_bytes_per_s", costs.storage_bytes_per_s},
                     {"read_latency_s", costs.read_latency_s},
                     {"read_latency_p99_s", costs.read_latency_p99_s},
                     {"read_cpu_s", costs.read_cpu_s}};
  report["prediction"] = {{"storage_samples_per_s", rec.predicted.storage_rate},
                          {"cpu_samples_per_s", rec.predicted.cpu_rate},
                          {"samples_per_s", rec.predicted.rate},
                          {"limit", probes::BottleneckName(rec.predicted.limit)},
                          {"default_config_samples_per_s", default_pred.rate}};
  report["default_run"] = RunJson(defaults, base, &diagnosis);
  report["recommended_run"] = RunJson(measured, chosen, &chosen_diag);

  if (opt.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return Status::Ok();
  }

  // Text: the verdict first, then the evidence, aligned.
  const char* name = probes::BottleneckName(verdict);
  std::string upper;
  for (const char* p = name; *p; ++p) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  if (required > 0 && verdict == probes::Bottleneck::kNone) {
    std::printf("verdict: INPUT KEEPS UP: %.0f samples/s measured; the step (%.1f ms, batch %d) needs %.0f "
                "(%.1fx headroom).\n",
                measured_rate, opt.step_ms, opt.batch_size, required, measured_rate / required);
  } else if (required > 0) {
    std::printf("verdict: %s-BOUND: %s. The step (%.1f ms, batch %d) needs %.0f samples/s, the input delivers "
                "%.0f: %s.\n",
                upper.c_str(), chosen_diag.reason.c_str(), opt.step_ms, opt.batch_size, required, measured_rate,
                step_met ? "met"
                         : ("NOT met, the accelerator would wait ~" + std::to_string(int(wait_per_step * 1e3 + 0.5)) +
                            " ms per step")
                               .c_str());
  } else {
    std::printf("verdict: %s-BOUND: %s; %.0f samples/s measured.\n", upper.c_str(), chosen_diag.reason.c_str(),
                measured_rate);
  }
  std::printf("recommend: --io-depth %d --decode-threads %d --prefetch %d  (measured %.0f samples/s, predicted %.0f; "
              "defaults %.0f)\n",
              rec.io_depth, rec.decode_threads, rec.prefetch_batches, measured_rate, rec.predicted.rate,
              defaults.evidence.Rate());
  if (costs.budget_bytes > 0) {
    std::printf("memory:    batch %d x %s/sample x (prefetch %d + 1) = %s of %s budget; largest batch %d%s\n",
                opt.batch_size, FormatBytes(costs.batch_bytes_per_sample).c_str(), rec.prefetch_batches,
                FormatBytes(costs.batch_bytes_per_sample * opt.batch_size * (rec.prefetch_batches + 1)).c_str(),
                FormatBytes(double(costs.budget_bytes)).c_str(), rec.max_batch_size,
                rec.batch_fits ? "" : "  (the batch does NOT fit)");
  }
  std::printf("\n");
  std::printf("dataset        %zu shard%s, %llu samples, %s (%s/sample), %s\n", shards.size(),
              shards.size() == 1 ? "" : "s", (unsigned long long)samples, FormatBytes(double(before.bytes)).c_str(),
              FormatBytes(sample_bytes).c_str(), fits ? "fits in page cache" : "larger than free memory");
  std::printf("page cache     %.0f%% resident before; drop %s (%.0f%% resident after); %.0f%% resident now\n",
              before.Fraction() * 100, dropped && dropped2 ? "worked" : "REFUSED",
              std::max(after_drop.Fraction(), after_drop2.Fraction()) * 100, after_hot.Fraction() * 100);
  const char* label = dropped && dropped2 ? "cold" : "page-cache, drop refused";
  std::printf("storage        sequential %s, random %s reads %s (p50 %.2f ms, p99 %.2f ms) [%s]%s\n",
              Rate(cold_seq.BytesPerSecond()).c_str(), FormatBytes(double(read_size)).c_str(),
              Rate(cold_rand.BytesPerSecond()).c_str(), cold_rand.LatencyQuantile(0.5) * 1e3,
              cold_rand.LatencyQuantile(0.99) * 1e3, label,
              throttle ? (", capped at " + Rate(double(throttle)) + " by --max-read-mbps").c_str() : "");
  std::printf("page-cache rd  sequential %s, random %s (%.1f us/read)\n", Rate(hot_seq.BytesPerSecond()).c_str(),
              Rate(hot_rand.BytesPerSecond()).c_str(), costs.read_cpu_s * 1e6);
  std::printf("cores          %s\n", cpu_share.ToString().c_str());
  std::printf("decode         %.3f ms/sample/core = %.0f samples/s/core; x %d cores = %.0f samples/s\n",
              decode_s * 1e3, decode_s > 0 ? 1 / decode_s : 0, cores, decode_s > 0 ? cores / decode_s : 0);
  std::printf("cpu            the loader got %.2f of %d cores at full speed%s\n", costs.cores_available, cores,
              costs.cores_available < 0.8 * cores ? " (other processes compete for them)" : "");
  if (IsParquetPath(shards.front())) {
    std::printf("index          Parquet footer load %.2f ms/file\n", load_s / shards.size() * 1e3);
  } else {
    std::printf("index          tar header scan %.2f ms/shard (%.0f members/s), index load %.2f ms/shard (%d/%zu "
                "sidecars)\n",
                scan_s / shards.size() * 1e3, scan_s > 0 ? members / scan_s : 0, load_s / shards.size() * 1e3,
                sidecars, shards.size());
  }
  std::printf("predicted      storage %.0f samples/s (%s), cpu %.0f samples/s -> %.0f samples/s, %s-limited\n",
              rec.predicted.storage_rate, hot_regime ? "page cache" : "storage", rec.predicted.cpu_rate,
              rec.predicted.rate, probes::BottleneckName(rec.predicted.limit));
  auto run_line = [&](const char* what, const RunResult& r, int prefetch, const probes::Diagnosis& d) {
    std::printf("%-14s io %d, decode %d, prefetch %d: %.0f samples/s; readers %.0f%% busy, decoders %.0f%% busy, "
                "starved %.0f%%: %s\n",
                what, r.evidence.io_depth, r.evidence.decode_threads, prefetch, r.evidence.Rate(),
                d.read_utilisation * 100, d.decode_utilisation * 100, d.decoder_starved * 100,
                probes::BottleneckName(d.bottleneck));
  };
  run_line("run defaults", defaults, base.prefetch_batches, diagnosis);
  run_line("run recommend", measured, chosen.prefetch_batches, chosen_diag);
  std::printf("\nnote: the doctor dropped these shards from the page cache and read them back in.\n");
  return Status::Ok();
}

}  // namespace

void RegisterDoctor(CLI::App& app, Status* status) {
  auto opt = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand("doctor", "Measure storage, decode and the pipeline; name the bottleneck and "
                                               "recommend a configuration");
  cmd->add_option("SOURCES", opt->sources, "shards: paths, brace ranges a-{000..031}.tar, globs, .txt lists")
      ->required();
  cmd->add_option("-f,--field", opt->fields, "FIELD:KIND[:ARGS], e.g. jpg:image:224, features.npz:npz, cls:scalar:int64, txt:text (none: inferred)")
      ->allow_extra_args(false);
  cmd->add_option("--step-ms", opt->step_ms, "the training step in milliseconds (0: none, maximise throughput)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch-size", opt->batch_size, "samples per batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--key-rule", opt->key_rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_option("--budget-mb", opt->budget_mb, "memory for batch buffers, MB (0: unbounded)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-read-mbps", opt->max_read_mbps, "simulate storage of this bandwidth, MB/s (0: as it is)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--run-seconds", opt->run_seconds, "length of each pipeline run")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--shuffle", opt->shuffle, "the job shuffles globally (random reads)");
  cmd->add_flag("--json", opt->json, "one JSON object on stdout with every figure");
  cmd->callback([=] { *status = RunDoctor(*opt); });
}

}  // namespace stoker::cli
