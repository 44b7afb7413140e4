// pipeline/tune_config.cc — see tune_config.h.
#include "pipeline/tune_config.h"

#include <algorithm>

#include "io/reader.h"
#include "pipeline/memory_budget.h"
#include "pipeline/read_runs.h"

namespace stoker {

namespace {

// The mean stored sample times the batch: the read-ahead's byte cap (read_runs.h).
uint64_t BatchBytes(const LoaderOptions& o, const std::vector<ShardSummary>& shards) {
  uint64_t bytes = 0, samples = 0;
  for (const ShardSummary& s : shards) {
    bytes += s.sample_bytes;
    samples += s.samples;
  }
  return samples ? bytes / samples * static_cast<uint64_t>(std::max(1, o.batch_size)) : 0;
}

}  // namespace

int GpuDecodePrefetch(const LoaderOptions& options, const BatchLayout& layout,
                      const std::function<uint64_t(const LoaderOptions&)>& need) {
  const int batch = std::max(1, options.batch_size);
  const int wanted = std::max(kGpuDecodePrefetch, (kGpuDecodePrefetchImages + batch - 1) / batch);
  const uint64_t fit = kMaxGpuDecodePrefetchBytes / std::max<uint64_t>(1, layout.buffer_bytes);
  LoaderOptions o = options;
  o.prefetch_batches =
      std::clamp(static_cast<int>(std::min<uint64_t>(wanted, fit)), kDefaultPrefetch, kMaxGpuDecodePrefetch);
  // Fewer batches in flight rather than a refusal, as AutoIoDepth (memory_budget.h) lowers reads.
  while (o.memory_budget > 0 && o.prefetch_batches > kDefaultPrefetch && need(o) > o.memory_budget) {
    --o.prefetch_batches;
  }
  return o.prefetch_batches;
}

LoaderOptions WithSettings(LoaderOptions o, const TuneSettings& s) {
  o.io_depth = s[Knob::kIoDepth];
  o.read_ahead_batches = s[Knob::kReadAhead];
  o.decode_threads = s[Knob::kDecodeThreads];
  o.prefetch_batches = s[Knob::kPrefetch];
  return o;
}

TuneConfig MakeTuneConfig(const LoaderOptions& user, const LoaderOptions& o, const BatchLayout& layout,
                          const std::vector<ShardSummary>& shards, bool remote, bool tokens, int cores,
                          uint64_t row_group_bytes) {
  TuneConfig c;
  c.cores = std::max(1, cores);
  c.has_decoders = !tokens;
  c.reads_per_batch = tokens ? 1 : ReadsPerBatch(o);
  // Reads go ahead of their buffers where a round trip is paid (read_runs.h):
  // a remote shard's rule, so a mixture whose first source is local still
  // reads its remote sources ahead (with the first shard's, it read none).
  const auto remote_shard =
      std::find_if(shards.begin(), shards.end(), [](const ShardSummary& s) { return IsRemoteUrl(s.path); });
  const std::string shard = remote_shard != shards.end() ? remote_shard->path
                            : shards.empty()             ? std::string()
                                                         : shards.front().path;
  const uint64_t batch_bytes = tokens ? 0 : BatchBytes(o, shards);
  TuneSettings& s = c.start;
  s[Knob::kIoDepth] = std::max(1, o.io_depth);
  s[Knob::kReadAhead] = tokens ? 0 : ReadAheadBatches(o, shard, batch_bytes);
  s[Knob::kDecodeThreads] = o.decode_threads > 0 ? o.decode_threads : c.cores;
  s[Knob::kPrefetch] = std::max(1, o.prefetch_batches);
  c.fixed[static_cast<int>(Knob::kIoDepth)] = !user.autotune || user.io_depth >= 0;
  // Local shards read nothing ahead of a buffer (a pread costs no round trip): not a knob there.
  c.fixed[static_cast<int>(Knob::kReadAhead)] =
      !user.autotune || user.read_ahead_batches >= 0 || s[Knob::kReadAhead] == 0;
  c.fixed[static_cast<int>(Knob::kDecodeThreads)] = !user.autotune || user.decode_threads > 0 || tokens;
  c.fixed[static_cast<int>(Knob::kPrefetch)] = !user.autotune || user.prefetch_batches > 0;
  c.user_set = {user.io_depth >= 0, user.read_ahead_batches >= 0, user.decode_threads > 0 && !tokens,
                user.prefetch_batches > 0};

  c.min = s;
  c.max = s;
  auto tunable = [&](Knob k) { return !c.fixed[static_cast<int>(k)]; };
  if (tunable(Knob::kIoDepth)) {
    c.min[Knob::kIoDepth] = 1;
    c.max[Knob::kIoDepth] = std::max(s[Knob::kIoDepth], remote ? kMaxRemoteIoDepth : kMaxLocalIoDepth);
  }
  if (tunable(Knob::kDecodeThreads)) {
    c.min[Knob::kDecodeThreads] = 1;
    c.max[Knob::kDecodeThreads] = std::max(s[Knob::kDecodeThreads], c.cores);
  }
  if (tunable(Knob::kPrefetch)) {
    c.min[Knob::kPrefetch] = 1;
    const uint64_t per = std::max<uint64_t>(1, layout.buffer_bytes);
    const int by_bytes = static_cast<int>(std::min<uint64_t>(kMaxPrefetch + 1, kMaxPrefetchBytes / per)) - 1;
    c.max[Knob::kPrefetch] = std::max(s[Knob::kPrefetch], std::min(kMaxPrefetch, by_bytes));
  }
  auto read_ahead_max = [&] {
    LoaderOptions m = o;
    m.io_depth = c.max[Knob::kIoDepth];
    m.read_ahead_batches = -1;
    return std::max(s[Knob::kReadAhead], ReadAheadBatches(m, shard, batch_bytes));
  };
  if (tunable(Knob::kReadAhead)) {
    c.min[Knob::kReadAhead] = 1;
    c.max[Knob::kReadAhead] = read_ahead_max();
  }
  // Every ceiling at once within the memory budget: reads first, then prefetch.
  if (o.memory_budget > 0 && !tokens) {
    auto fits = [&] {
      return EstimateMemory(WithSettings(o, c.max), layout, shards, row_group_bytes).total() <= o.memory_budget;
    };
    while (!fits() && c.max[Knob::kIoDepth] > s[Knob::kIoDepth]) {
      c.max[Knob::kIoDepth] = std::max(s[Knob::kIoDepth], c.max[Knob::kIoDepth] / 2);
      if (tunable(Knob::kReadAhead)) c.max[Knob::kReadAhead] = read_ahead_max();
    }
    while (!fits() && c.max[Knob::kPrefetch] > s[Knob::kPrefetch]) --c.max[Knob::kPrefetch];
    while (!fits() && c.max[Knob::kDecodeThreads] > s[Knob::kDecodeThreads]) --c.max[Knob::kDecodeThreads];
  }
  return c;
}

TuneConfig MakeStreamTuneConfig(const LoaderOptions& user, const LoaderOptions& o, const BatchLayout& layout,
                                uint64_t sample_bytes, uint64_t window_bytes, int cores) {
  TuneConfig c;
  c.cores = std::max(1, cores);
  TuneSettings& s = c.start;
  s[Knob::kIoDepth] = 1;
  s[Knob::kReadAhead] = 0;
  s[Knob::kDecodeThreads] = o.decode_threads > 0 ? o.decode_threads : c.cores;
  s[Knob::kPrefetch] = std::max(1, o.prefetch_batches);
  c.fixed = {true, true, !user.autotune || user.decode_threads > 0, !user.autotune || user.prefetch_batches > 0};
  c.user_set = {false, false, user.decode_threads > 0, user.prefetch_batches > 0};
  c.min = s;
  c.max = s;
  if (!c.fixed[static_cast<int>(Knob::kDecodeThreads)]) {
    c.min[Knob::kDecodeThreads] = 1;
    c.max[Knob::kDecodeThreads] = std::max(s[Knob::kDecodeThreads], c.cores);
  }
  if (!c.fixed[static_cast<int>(Knob::kPrefetch)]) {
    c.min[Knob::kPrefetch] = 1;
    const uint64_t per = std::max<uint64_t>(1, layout.buffer_bytes);
    const int by_bytes = static_cast<int>(std::min<uint64_t>(kMaxPrefetch + 1, kMaxPrefetchBytes / per)) - 1;
    c.max[Knob::kPrefetch] = std::max(s[Knob::kPrefetch], std::min(kMaxPrefetch, by_bytes));
  }
  if (o.memory_budget > 0) {
    auto fits = [&] {
      return EstimateStreamMemory(WithSettings(o, c.max), layout, sample_bytes, window_bytes).total() <=
             o.memory_budget;
    };
    while (!fits() && c.max[Knob::kPrefetch] > s[Knob::kPrefetch]) --c.max[Knob::kPrefetch];
    while (!fits() && c.max[Knob::kDecodeThreads] > s[Knob::kDecodeThreads]) --c.max[Knob::kDecodeThreads];
  }
  return c;
}

LoaderSettings ToLoaderSettings(const TuneConfig& config, const TuneSettings& now, bool autotune) {
  LoaderSettings out;
  out.autotune = autotune;
  out.io_depth = now[Knob::kIoDepth];
  out.read_ahead_batches = now[Knob::kReadAhead];
  out.decode_threads = now[Knob::kDecodeThreads];
  out.prefetch_batches = now[Knob::kPrefetch];
  for (int i = 0; i < kKnobs; ++i)
    if (config.user_set[i]) out.fixed.push_back(KnobName(static_cast<Knob>(i)));
  return out;
}

}  // namespace stoker
