// tests/cpp/pipeline/autotune_test.cc — the controller's rules, bounds and
// hysteresis, fed scripted windows of evidence.
#include "pipeline/autotune.h"

#include <gtest/gtest.h>

#include "pipeline/memory_budget.h"
#include "pipeline/read_runs.h"
#include "pipeline/shard_indexes.h"
#include "pipeline/tune_config.h"

namespace stoker {
namespace {

// A remote-like loader: io_depth 8 (max 64), read-ahead 1 (max 16, 4 reads a
// batch), 2 decoders on 2 cores, prefetch 2 (max 8); nothing fixed.
TuneConfig Remote() {
  TuneConfig c;
  c.start.v = {8, 2, 2, 2};
  c.min.v = {1, 1, 1, 1};
  c.max.v = {64, 16, 2, 8};
  c.reads_per_batch = 4;
  c.cores = 2;
  return c;
}

// Readers all waiting on storage (21 ms a read), decoders mostly idle, the
// step waiting 60% of the time; `rate` batches/s.
TuneEvidence ReadsBound(double rate, double t = 1) {
  TuneEvidence e;
  e.time_s = t;
  e.wall_s = 0.5;
  e.batches = rate * e.wall_s;
  e.wait_frac = 0.6;
  e.read_ms = 21;
  e.read_util = 0.95;
  e.decode_util = 0.4;
  e.consumer_cores = 0.05;
  return e;
}

TEST(Autotune, ReadsWaitingAndDecodersIdleDoubleReadsInFlightWithReadAhead) {
  Autotuner t(Remote());
  std::vector<TuneChange> c = t.Decide(ReadsBound(10));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].knob, "io_depth");
  EXPECT_EQ(c[0].from, 8);
  EXPECT_EQ(c[0].to, 16);
  EXPECT_EQ(c[0].Line().rfind("io_depth 8 \u2192 16: reads wait 21 ms each, readers busy 95%, decoders idle 60%", 0),
            0u)
      << c[0].Line();
  EXPECT_EQ(c[1].knob, "read_ahead_batches");
  EXPECT_EQ(c[1].to, 4);  // 16 reads at 4 a batch
  // The trial gained: kept, and the next window may go on.
  EXPECT_TRUE(t.Decide(ReadsBound(20)).empty());
  EXPECT_EQ(t.settings()[Knob::kIoDepth], 16);
  c = t.Decide(ReadsBound(20));
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].to, 32);
}

TEST(Autotune, ReadsThatAreCopiesFromMemoryGetNoMoreInFlight) {
  // A token corpus's windows from its memory map: readers busy, the step
  // waiting, but each read a 30 us copy: more reads would only add threads.
  TuneEvidence e = ReadsBound(10);
  e.read_ms = 0.03;
  Autotuner t(Remote());
  EXPECT_TRUE(t.Decide(e).empty());
  EXPECT_EQ(t.settings()[Knob::kIoDepth], 8);
}

TEST(Autotune, AnIncreaseWithoutGainIsUndoneAndNeverTriedAgain) {
  Autotuner t(Remote());
  int changes = 0;
  for (int w = 0; w < 200; ++w) changes += static_cast<int>(t.Decide(ReadsBound(10, w)).size());
  // 8 -> 16 (with read-ahead), back to 8 (with read-ahead), then nothing.
  EXPECT_EQ(changes, 4);
  EXPECT_EQ(t.settings()[Knob::kIoDepth], 8);
  EXPECT_EQ(t.settings()[Knob::kReadAhead], 2);
  EXPECT_EQ(t.config().max[Knob::kIoDepth], 8);
}

TEST(Autotune, NeverPastTheCeilings) {
  Autotuner t(Remote());
  double rate = 1;
  for (int w = 0; w < 100; ++w) {
    rate *= 2;  // every trial gains
    TuneEvidence e = ReadsBound(rate, w);
    t.Decide(e);
    for (int k = 0; k < kKnobs; ++k) {
      EXPECT_LE(t.settings().v[k], Remote().max.v[k]);
      EXPECT_GE(t.settings().v[k], Remote().min.v[k]);
    }
  }
  EXPECT_EQ(t.settings()[Knob::kIoDepth], 64);
  EXPECT_EQ(t.settings()[Knob::kReadAhead], 16);
}

TEST(Autotune, AKnobTheUserSetNeverMoves) {
  TuneConfig c = Remote();
  c.fixed[static_cast<int>(Knob::kIoDepth)] = true;
  c.fixed[static_cast<int>(Knob::kReadAhead)] = true;
  Autotuner t(c);
  for (int w = 0; w < 50; ++w) {
    for (const TuneChange& ch : t.Decide(ReadsBound(1 << (w % 20), w))) {
      EXPECT_NE(ch.knob, "io_depth");
      EXPECT_NE(ch.knob, "read_ahead_batches");
    }
  }
  EXPECT_EQ(t.settings()[Knob::kIoDepth], 8);
}

TEST(Autotune, DecodersMakeRoomForAStepThatUsesACore) {
  Autotuner t(Remote());
  TuneEvidence e = ReadsBound(10);
  e.wait_frac = 0;  // input keeps up
  e.read_util = 0.2;
  e.decode_util = 0.9;
  e.consumer_cores = 0.8;  // contention already took some of its core
  std::vector<TuneChange> c = t.Decide(e);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].Line().rfind("decode_threads 2 \u2192 1: the training step uses 0.8 of 2 cores", 0), 0u)
      << c[0].Line();
  // With one decoder the step waits half the time and uses half as much CPU:
  // it still needs its core while it runs, so the decoder stays given up.
  e.wait_frac = 0.5;
  e.consumer_cores = 0.4;
  e.decode_util = 0.95;
  for (int w = 0; w < 10; ++w) EXPECT_TRUE(t.Decide(e).empty());
  EXPECT_EQ(t.settings()[Knob::kDecodeThreads], 1);
}

// A loop that waits for data nearly all the time while some other thread of the
// process (a logger, a metrics exporter, a benchmark's /proc sampler) uses a
// little CPU: that CPU is no step needing a core. Divided by the 2% of the time
// the loop runs it read as 2 cores and took a decoder (V, 2 cores: 2,300 ->
// 1,600-1,800 samples/s beside a thread using 0.02-0.1 core).
TEST(Autotune, ALittleCpuBesideALoopThatWaitsTakesNoDecoder) {
  Autotuner t(Remote());
  TuneEvidence e = ReadsBound(10);
  e.wait_frac = 0.98;
  e.read_util = 0.05;
  e.read_ms = 0.05;
  e.decode_util = 0.95;
  for (double cpu : {0.02, 0.05, 0.1}) {
    e.consumer_cores = cpu;
    for (int w = 0; w < 5; ++w) {
      for (const TuneChange& ch : t.Decide(e)) EXPECT_NE(ch.knob, "decode_threads") << ch.Line();
    }
  }
  EXPECT_EQ(t.settings()[Knob::kDecodeThreads], 2);
}

TEST(Autotune, DecodeBoundAddsADecoderUpToTheFreeCores) {
  TuneConfig cfg = Remote();
  cfg.start[Knob::kDecodeThreads] = 1;
  cfg.max[Knob::kDecodeThreads] = 4;
  cfg.cores = 4;
  Autotuner t(cfg);
  TuneEvidence e = ReadsBound(10);
  e.read_util = 0.1;
  e.decode_util = 0.97;
  e.consumer_cores = 0.8;  // waiting 60% of the time: two of the four cores while it runs
  double rate = 10;
  for (int w = 0; w < 20; ++w) {
    rate *= 1.5;
    e.batches = rate * e.wall_s;
    t.Decide(e);
  }
  EXPECT_EQ(t.settings()[Knob::kDecodeThreads], 2);
}

TEST(Autotune, WaitingForBuffersWhileNeitherStageIsBusyDeepensPrefetch) {
  Autotuner t(Remote());
  TuneEvidence e = ReadsBound(10);
  e.read_util = 0.3;
  e.decode_util = 0.5;
  e.wait_frac = 0.2;
  // Idle stages alone are not evidence: without a wait for buffers, threads
  // wait for a core (another process's load), and more buffers cannot help.
  EXPECT_TRUE(t.Decide(e).empty());
  e.pool_wait_frac = 0.5;
  std::vector<TuneChange> c = t.Decide(e);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].knob, "prefetch");
  EXPECT_EQ(c[0].to, 3);
}

// The step's CPU use flips every window between a full core and none while
// decoders are saturated: rules 1 and 3 would trade a decoder forever; the
// reversal budget stops it.
TEST(Autotune, AFlappingStepCannotMakeItOscillateWithoutBound) {
  Autotuner t(Remote());
  TuneEvidence e = ReadsBound(10);
  e.read_util = 0.1;
  e.decode_util = 0.95;
  int changes = 0;
  double rate = 10;
  for (int w = 0; w < 1000; ++w) {
    e.consumer_cores = w % 2 ? 1.0 : 0.0;
    rate *= 1.1;  // every trial looks like a gain
    e.batches = rate * e.wall_s;
    changes += static_cast<int>(t.Decide(e).size());
  }
  EXPECT_LE(changes, Autotuner::kMaxReversals + 2);
}

TEST(TuneConfig, UserKnobsAreFixedAndAutotuneOffFixesAll) {
  LoaderOptions user;
  user.batch_size = 4;
  user.io_depth = 3;
  LoaderOptions resolved = user;
  resolved.prefetch_batches = kDefaultPrefetch;
  BatchLayout layout;
  layout.buffer_bytes = 1 << 20;
  std::vector<ShardIndex> ix(1);
  ix[0].shard_path = "/local/a.tar";
  ix[0].samples.push_back({"k", {}, 0, 100});
  TuneConfig c = MakeTuneConfig(user, resolved, layout, SummariesOf(ix), /*remote=*/false, /*tokens=*/false, 2);
  EXPECT_TRUE(c.fixed[static_cast<int>(Knob::kIoDepth)]);
  EXPECT_TRUE(c.fixed[static_cast<int>(Knob::kReadAhead)]);  // local: nothing is read ahead
  EXPECT_FALSE(c.fixed[static_cast<int>(Knob::kDecodeThreads)]);
  EXPECT_FALSE(c.fixed[static_cast<int>(Knob::kPrefetch)]);
  EXPECT_EQ(c.start[Knob::kIoDepth], 3);
  EXPECT_EQ(c.start[Knob::kDecodeThreads], 2);
  EXPECT_EQ(c.max[Knob::kPrefetch], kMaxPrefetch);
  EXPECT_EQ(ToLoaderSettings(c, c.start, true).fixed, std::vector<std::string>{"io_depth"});
  user.autotune = false;
  c = MakeTuneConfig(user, resolved, layout, SummariesOf(ix), false, false, 2);
  for (bool f : c.fixed) EXPECT_TRUE(f);
}

TEST(TuneConfig, AMixtureWhoseFirstSourceIsLocalReadsItsRemoteOnesAhead) {
  // The read ahead follows a remote shard wherever it sits among the shards
  // (a stoker.mix of a local source, then one over HTTP), not the first's.
  LoaderOptions user;
  user.batch_size = 8;
  LoaderOptions resolved = user;
  resolved.prefetch_batches = kDefaultPrefetch;
  resolved.io_depth = 40;
  BatchLayout layout;
  layout.buffer_bytes = 1 << 20;
  std::vector<ShardIndex> ix(2);
  ix[0].shard_path = "/local/a.tar";
  ix[1].shard_path = "http://host/b.tar";
  for (ShardIndex& t : ix) t.samples.push_back({"k", {}, 0, 100});
  TuneConfig c = MakeTuneConfig(user, resolved, layout, SummariesOf(ix), /*remote=*/true, /*tokens=*/false, 2);
  EXPECT_EQ(c.start[Knob::kReadAhead], ReadAheadBatches(resolved, "http://host/b.tar", 8 * 100));
  EXPECT_GT(c.start[Knob::kReadAhead], 0);
  EXPECT_FALSE(c.fixed[static_cast<int>(Knob::kReadAhead)]);
}

TEST(TuneConfig, CeilingsFitTheMemoryBudgetTogether) {
  LoaderOptions user;
  user.batch_size = 8;
  user.fields = {ImageField("jpg", ImageSpec{})};
  LoaderOptions resolved = user;
  resolved.prefetch_batches = kDefaultPrefetch;
  resolved.io_depth = 8;
  resolved.shuffle = true;
  resolved.shuffle_block = 16;
  BatchLayout layout;
  layout.buffer_bytes = 4 << 20;
  std::vector<ShardIndex> ix(1);
  ix[0].shard_path = "http://host/a.tar";
  for (uint64_t i = 0; i < 64; ++i) ix[0].samples.push_back({"k", {}, i << 20, (i + 1) << 20});
  resolved.memory_budget = 160ull << 20;
  TuneConfig c = MakeTuneConfig(user, resolved, layout, SummariesOf(ix), /*remote=*/true, /*tokens=*/false, 2);
  EXPECT_LE(EstimateMemory(WithSettings(resolved, c.max), layout, SummariesOf(ix)).total(), resolved.memory_budget);
  EXPECT_LT(c.max[Knob::kIoDepth], kMaxRemoteIoDepth);
  EXPECT_GE(c.max[Knob::kIoDepth], c.start[Knob::kIoDepth]);
}

}  // namespace
}  // namespace stoker
