// tests/cpp/pipeline/tuned_run_test.cc — settings moved in mid-epoch leave
// the stream as it was: an EpochRun whose reads in flight, decode threads and
// prefetch are changed every few batches (a scripted controller) under a
// bandwidth cap delivers the very batches of a run whose settings never
// moved, and never runs more threads than the ceilings allow. The same for
// a StreamRun (stream mode), whose knobs are decode threads and prefetch.
#include <dirent.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "formats/tar.h"
#include "io/reader.h"
#include "pipeline/epoch_run.h"
#include "pipeline/planner.h"
#include "pipeline/shard_files.h"
#include "pipeline/shard_indexes.h"
#include "pipeline/shard_stream.h"
#include "pipeline/stream_run.h"

namespace stoker {
namespace {

// 4 shards x 32 samples "k<i>.cls" = "<i>", padded so each read has bytes to throttle.
std::vector<std::string> MakeShards() {
  char tmpl[] = "/tmp/stoker-tuned-run-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<std::string> shards;
  for (int s = 0; s < 4; ++s) {
    shards.push_back(dir + "/s" + std::to_string(s) + ".tar");
    auto w = TarWriter::Create(shards.back());
    EXPECT_TRUE(w.ok());
    for (int i = s * 32; i < (s + 1) * 32; ++i) {
      std::string v = std::to_string(i) + std::string(2000, ' ');
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(v.data()), v.size()})
                      .ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return shards;
}

int ThreadsOfProcess() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

struct World {
  Dataset data;
  std::unique_ptr<ShardFiles> files;
  std::vector<uint32_t> counts;
};

std::unique_ptr<World> MakeWorld(const std::vector<std::string>& shards) {
  auto w = std::make_unique<World>();
  LoaderOptions& o = w->data.options;
  o.fields = {ScalarField("cls", DType::kI64)};
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 11;
  o.max_read_bytes_per_s = 400'000;  // scripted slow storage: ~200 samples/s
  w->data.shards = shards;
  auto ix = LoadShardIndexes(shards, o.key_rule, DefaultIoOptions());
  EXPECT_TRUE(ix.ok());
  w->data.indexes = ShardIndexCache::Holding(std::move(*ix));
  auto first = w->data.indexes->Get(0);
  EXPECT_TRUE(first.ok());
  const SampleView e = (*first)->samples[0];
  auto file = OpenReader(shards[0], DefaultIoOptions());
  EXPECT_TRUE(file.ok());
  std::vector<uint8_t> probe(e.end - e.begin);
  EXPECT_TRUE((*file)->PRead(e.begin, probe).ok());
  auto layout = MakeBatchLayout(o.fields, o.batch_size, e, probe, shards[0]);
  EXPECT_TRUE(layout.ok());
  w->data.layout = std::move(*layout);
  w->data.tuned.v = {2, 0, 2, 2};
  w->data.tune_max.v = {8, 0, 4, 6};
  for (const ShardSummary& s : w->data.indexes->summaries()) w->counts.push_back(s.samples);
  w->files = std::make_unique<ShardFiles>(&w->data.shards, 0, ShardFiles::kMapUnbounded, DefaultIoOptions());
  return w;
}

// The epoch's values in delivery order; every `every` batches the next of
// `script` is applied (none: the settings never move).
std::vector<int64_t> RunEpoch(World& w, const std::vector<TuneSettings>& script, int every, int* max_threads) {
  auto plan = PlanEpoch(w.counts, w.data.options, 0);
  EXPECT_TRUE(plan.ok());
  auto pool = BufferPool::Create(w.data.layout.buffer_bytes, static_cast<size_t>(w.data.tune_max[Knob::kPrefetch]) + 1);
  const int before = ThreadsOfProcess();
  EpochRun run(&w.data, w.files.get(), pool, std::make_shared<const EpochPlan>(std::move(*plan)), 0, 0);
  std::vector<int64_t> out;
  size_t next_script = 0;
  for (int64_t b = 0;; ++b) {
    if (b == 32) break;  // 128 samples, batches of 4
    if (!script.empty() && b % every == every - 1) run.Apply(script[next_script++ % script.size()]);
    auto work = run.NextReady();
    EXPECT_TRUE(work.ok()) << work.status().ToString();
    if (!work.ok()) break;
    const ArraySlot& cls = w.data.layout.arrays[0];
    for (int i = 0; i < (*work)->size; ++i) {
      int64_t v;
      std::memcpy(&v, (*work)->lease->data() + cls.offset + cls.sample_bytes * i, 8);
      out.push_back(v);
    }
    *max_threads = std::max(*max_threads, ThreadsOfProcess() - before);
  }
  return out;
}

TEST(TunedRun, SettingsMovedMidEpochLeaveTheStreamIdentical) {
  const std::vector<std::string> shards = MakeShards();
  auto w = MakeWorld(shards);
  int fixed_threads = 0, tuned_threads = 0;
  const std::vector<int64_t> fixed = RunEpoch(*w, {}, 0, &fixed_threads);
  ASSERT_EQ(fixed.size(), 128u);
  // The reference: the planner's order (sample i of the dataset holds the value i).
  auto plan = PlanEpoch(w->counts, w->data.options, 0);
  ASSERT_TRUE(plan.ok());
  for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(fixed[k], static_cast<int64_t>(plan->At(k).global)) << k;
  // Threads up and down, reads in flight up and down, prefetch from 1 to 6.
  std::vector<TuneSettings> script(6);
  script[0].v = {8, 0, 4, 6};
  script[1].v = {1, 0, 1, 1};
  script[2].v = {4, 0, 3, 2};
  script[3].v = {2, 0, 1, 5};
  script[4].v = {8, 0, 2, 1};
  script[5].v = {1, 0, 4, 3};
  const std::vector<int64_t> tuned = RunEpoch(*w, script, 3, &tuned_threads);
  EXPECT_EQ(tuned, fixed);
  // Scheduler + at most 8 readers + 4 decoders: the ceilings, never more.
  EXPECT_LE(tuned_threads, 1 + 8 + 4);
  EXPECT_GE(tuned_threads, 1 + 8);  // the script did start the most readers
  EXPECT_LE(fixed_threads, 1 + 2 + 2);
}

// Settings past the ceilings are clamped to them (Apply never starts more).
TEST(TunedRun, ApplyNeverStartsThreadsPastTheCeilings) {
  const std::vector<std::string> shards = MakeShards();
  auto w = MakeWorld(shards);
  std::vector<TuneSettings> script(1);
  script[0].v = {100, 0, 100, 100};
  int threads = 0;
  const std::vector<int64_t> got = RunEpoch(*w, script, 2, &threads);
  EXPECT_EQ(got.size(), 128u);
  EXPECT_LE(threads, 1 + 8 + 4);
}

// A stream's batches along two passes, the settings moved as RunEpoch moves them.
std::vector<int64_t> RunStream(const std::vector<std::string>& shards, const std::vector<TuneSettings>& script,
                               int every, int* max_threads) {
  StreamDataset data;
  LoaderOptions& o = data.options;
  o.fields = {ScalarField("cls", DType::kI64)};
  o.batch_size = 4;
  o.shuffle = true;
  o.shuffle_buffer = 16;
  o.seed = 11;
  o.samples_per_epoch = 128;
  o.max_read_bytes_per_s = 400'000;
  o.storage = DefaultIoOptions();
  data.shards = shards;
  auto probe = ShardStream::Open(shards[0], 0, *o.storage, /*first=*/true);
  EXPECT_TRUE(probe.ok());
  auto first = (*probe)->Next();
  EXPECT_TRUE(first.ok() && first->has_value());
  auto layout = MakeBatchLayout(o.fields, o.batch_size, (*first)->Entry(), (*first)->data(), shards[0]);
  EXPECT_TRUE(layout.ok());
  data.layout = std::move(*layout);
  data.epoch_batches = 32;
  data.tuned.v = {1, 0, 2, 2};
  data.tune_max.v = {1, 0, 4, 6};
  auto pool = BufferPool::Create(data.layout.buffer_bytes, static_cast<size_t>(data.tune_max[Knob::kPrefetch]) + 1);
  const int before = ThreadsOfProcess();
  std::vector<int64_t> out;
  {
    StreamRun run(&data, pool, StreamMixOrder::Make(data.options).value(), 0);
    size_t next_script = 0;
    for (int64_t b = 0; b < 64; ++b) {
      if (!script.empty() && b % every == every - 1) run.Apply(script[next_script++ % script.size()]);
      auto work = run.NextReady(0, std::chrono::steady_clock::now());
      EXPECT_TRUE(work.ok()) << work.status().ToString();
      if (!work.ok()) break;
      const ArraySlot& cls = data.layout.arrays[0];
      for (int i = 0; i < o.batch_size; ++i) {
        int64_t v;
        std::memcpy(&v, (*work)->lease->data() + cls.offset + cls.sample_bytes * i, 8);
        out.push_back(v);
      }
      *max_threads = std::max(*max_threads, ThreadsOfProcess() - before);
    }
  }
  return out;
}

TEST(TunedRun, StreamSettingsMovedMidRunLeaveTheStreamIdentical) {
  const std::vector<std::string> shards = MakeShards();
  int fixed_threads = 0, tuned_threads = 0;
  const std::vector<int64_t> fixed = RunStream(shards, {}, 0, &fixed_threads);
  ASSERT_EQ(fixed.size(), 256u);
  // Each pass is every sample once (the reference: the values 0..127).
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<int64_t> seen(fixed.begin() + pass * 128, fixed.begin() + (pass + 1) * 128);
    std::sort(seen.begin(), seen.end());
    for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(seen[k], k) << pass;
  }
  std::vector<TuneSettings> script(5);
  script[0].v = {1, 0, 4, 6};
  script[1].v = {1, 0, 1, 1};
  script[2].v = {1, 0, 3, 2};
  script[3].v = {1, 0, 1, 5};
  script[4].v = {1, 0, 100, 100};  // past the ceilings: clamped
  const std::vector<int64_t> tuned = RunStream(shards, script, 3, &tuned_threads);
  EXPECT_EQ(tuned, fixed);
  // The producer, at most 4 decoders, and the next shard's opening ahead:
  // one, or two for a moment while the last one's thread exits (seen under TSan).
  EXPECT_LE(tuned_threads, 1 + 4 + 2);
  EXPECT_GE(tuned_threads, 1 + 4);  // the script did start the most decoders
  EXPECT_LE(fixed_threads, 1 + 2 + 2);
}

}  // namespace
}  // namespace stoker
