// observe/probes_test.cc — the doctor's file probes on a temporary file, and
// its rules (prediction, diagnosis, recommendation) on made-up figures whose
// right answer is known.
#include "observe/probes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace stoker::probes {
namespace {

std::string TempFile(size_t bytes) {
  char name[] = "/tmp/stoker_probes_XXXXXX";
  int fd = ::mkstemp(name);
  EXPECT_GE(fd, 0);
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 131);
  EXPECT_EQ(::write(fd, data.data(), bytes), static_cast<ssize_t>(bytes));
  ::close(fd);
  return name;
}

TEST(ResidencyTest, CountsBitZeroOnly) {
  const unsigned char vec[] = {1, 0, 3, 2, 0x81, 0};
  EXPECT_EQ(CountResident(vec), 3u);  // 2 has bit 0 clear; the others' high bits are reserved
  Residency r{.pages = 4, .resident = 1, .bytes = 16384};
  EXPECT_DOUBLE_EQ(r.Fraction(), 0.25);
  EXPECT_DOUBLE_EQ(Residency{}.Fraction(), 1.0);  // no pages: nothing to miss
  r += Residency{.pages = 4, .resident = 3, .bytes = 16384};
  EXPECT_DOUBLE_EQ(r.Fraction(), 0.5);
}

TEST(ResidencyTest, ReadFileIsResidentAndDropIsReportedHonestly) {
  const std::string path = TempFile(1 << 20);
  auto seq = SequentialRead({path}, 64 << 10, {});
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  EXPECT_EQ(seq->bytes, 1u << 20);
  EXPECT_EQ(seq->reads, 16u);
  auto r = FileResidency(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, 1u << 20);
  EXPECT_EQ(r->pages, (1u << 20) / static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_GT(r->Fraction(), 0.9);  // just read
  ASSERT_TRUE(DropFromPageCache(path).ok());
  auto after = FileResidency(path);
  ASSERT_TRUE(after.ok());
  // Whether the kernel took the advice depends on the filesystem; the probe
  // must only report a fraction in range, and no more pages than before.
  EXPECT_LE(after->resident, r->resident);
  std::filesystem::remove(path);
}

TEST(ReadProbeTest, RandomReadVisitsEachSlotAtMostOnce) {
  const std::string path = TempFile(10 * 4096 + 100);
  // 11 page slots of 4 KiB: a generous limit still stops after 11 reads.
  auto p = RandomRead({path}, 4096, {1ull << 30, 10.0}, 7);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->reads, 11u);
  EXPECT_EQ(p->bytes, 10u * 4096 + 100);  // the last slot is short
  uint64_t counted = 0;
  for (uint64_t c : p->latency) counted += c;
  EXPECT_EQ(counted, 11u);
  EXPECT_FALSE(RandomRead({path}, 0, {}, 1).ok());
  EXPECT_FALSE(FileResidency("/nonexistent/stoker").ok());
  std::filesystem::remove(path);
}

Costs DecodeHeavy() {
  Costs c;
  c.cores = 2;
  c.decode_s = 1e-3;                 // 1000 samples/s per core
  c.read_cpu_s = 0;
  c.sample_bytes = 100e3;
  c.batch_bytes_per_sample = 150e3;
  c.storage_bytes_per_s = 1e9;       // 10,000 samples/s
  c.read_latency_s = 20e-6;
  c.read_latency_p99_s = 50e-6;
  c.batch_size = 32;
  c.step_s = 0.001;                  // needs 32,000 samples/s: cannot be met
  c.budget_bytes = 0;
  return c;
}

TEST(PredictTest, TheSmallerResourceLimits) {
  Costs c = DecodeHeavy();
  Prediction p = Predict(c, 4, 2);
  EXPECT_DOUBLE_EQ(p.cpu_rate, 2000);
  EXPECT_DOUBLE_EQ(p.storage_rate, 10000);
  EXPECT_DOUBLE_EQ(p.rate, 2000);
  EXPECT_EQ(p.limit, Bottleneck::kDecode);
  // Decoders beyond the cores add nothing; fewer use fewer.
  EXPECT_DOUBLE_EQ(Predict(c, 4, 8).cpu_rate, 2000);
  EXPECT_DOUBLE_EQ(Predict(c, 4, 1).cpu_rate, 1000);
  // A machine that lends only half a core.
  c.cores_available = 0.5;
  EXPECT_DOUBLE_EQ(Predict(c, 4, 2).cpu_rate, 500);
  // Slow storage: 10 MB/s is 100 samples/s; Little's law caps a deep queue too.
  c = DecodeHeavy();
  c.storage_bytes_per_s = 10e6;
  EXPECT_EQ(Predict(c, 4, 2).limit, Bottleneck::kStorage);
  EXPECT_DOUBLE_EQ(Predict(c, 4, 2).rate, 100);
  c.storage_bytes_per_s = 1e9;
  c.read_latency_s = 10e-3;          // 10 ms per read: 1 in flight gives 100/s
  EXPECT_DOUBLE_EQ(Predict(c, 1, 2).storage_rate, 100);
  EXPECT_DOUBLE_EQ(Predict(c, 8, 2).storage_rate, 800);
}

TEST(RecommendTest, UnmeetableStepUsesEveryCore) {
  Recommendation r = Recommend(DecodeHeavy());
  EXPECT_EQ(r.decode_threads, 2);
  EXPECT_EQ(r.io_depth, 2);          // page-cache latency: the floor
  EXPECT_EQ(r.prefetch_batches, 2);
  EXPECT_FALSE(r.step_met);
  EXPECT_DOUBLE_EQ(r.predicted.rate, 2000);
  EXPECT_FALSE(r.notes.empty());
}

TEST(RecommendTest, ContendedMachineGetsOneDecoderMore) {
  Costs c = DecodeHeavy();
  c.cores_available = 0.9;           // of 2: other processes take the rest
  EXPECT_EQ(Recommend(c).decode_threads, 3);
  c.cores_available = 1.9;           // the cores were there
  EXPECT_EQ(Recommend(c).decode_threads, 2);
  c.cores_available = 0.9;
  c.step_s = 0.1;                    // 320/s needs 0.4 core: no reason to claim more
  EXPECT_EQ(Recommend(c).decode_threads, 1);
}

TEST(RecommendTest, EasyStepLeavesCoresToTraining) {
  Costs c = DecodeHeavy();
  c.cores = 8;
  c.step_s = 0.1;                    // 320 samples/s x 1 ms x 1.25 = 0.4 core
  Recommendation r = Recommend(c);
  EXPECT_EQ(r.decode_threads, 1);
  EXPECT_TRUE(r.step_met);
  c.step_s = 0.01;                   // 3200/s x 1 ms x 1.25 = 4 cores
  EXPECT_EQ(Recommend(c).decode_threads, 4);
}

TEST(RecommendTest, IoDepthFollowsLittlesLaw) {
  Costs c = DecodeHeavy();
  c.read_latency_s = 10e-3;          // remote storage, 10 ms per sample read
  c.read_latency_p99_s = 40e-3;
  c.step_s = 0;                      // maximise: the decoders take 2000/s
  Recommendation r = Recommend(c);
  // 2000/s x 10 ms = 20 in flight, x1.5 = 30.
  EXPECT_EQ(r.io_depth, 30);
  EXPECT_EQ(r.prefetch_batches, 2);  // p99 40 ms < 50 ms
  c.read_latency_p99_s = 200e-3;     // a long tail: bank more batches
  EXPECT_EQ(Recommend(c).prefetch_batches, 4);
  // Storage gives only 100 samples/s: no point in more reads than that needs.
  c.storage_bytes_per_s = 10e6;
  EXPECT_EQ(Recommend(c).io_depth, 2);  // 100/s x 10 ms x 1.5 = 1.5 -> floor 2
}

TEST(RecommendTest, MemoryBudgetBoundsPrefetchAndBatch) {
  Costs c = DecodeHeavy();
  c.batch_bytes_per_sample = 1e6;    // 1 MB per sample, batch 32 = 32 MB
  c.budget_bytes = 100'000'000;      // 3 batches fit (96 MB), 4 do not
  Recommendation r = Recommend(c);
  EXPECT_EQ(r.prefetch_batches, 2);
  EXPECT_TRUE(r.batch_fits);
  EXPECT_EQ(r.max_batch_size, 33);   // 100 MB / (3 x 1 MB)
  c.budget_bytes = 70'000'000;       // only 2 batches: prefetch 1
  r = Recommend(c);
  EXPECT_EQ(r.prefetch_batches, 1);
  EXPECT_TRUE(r.batch_fits);
  EXPECT_EQ(r.max_batch_size, 35);
  c.budget_bytes = 40'000'000;       // not even 2 batches of 32
  r = Recommend(c);
  EXPECT_EQ(r.prefetch_batches, 1);
  EXPECT_FALSE(r.batch_fits);
  EXPECT_EQ(r.max_batch_size, 20);
}

RunEvidence Evidence(double read_busy, double decode_busy, double get_wait, double put_wait) {
  RunEvidence e;
  e.wall_s = 1;
  e.samples = 1000;
  e.io_depth = 4, e.decode_threads = 2, e.cores = 2;
  e.read_busy_s = read_busy, e.decode_busy_s = decode_busy;
  e.decode_get_wait_s = get_wait, e.decode_put_wait_s = put_wait;
  return e;
}

TEST(DiagnoseTest, NamesTheStageFromEvidence) {
  // Readers busy (throttled storage), decoders waiting for bytes.
  Diagnosis d = Diagnose(Evidence(3.8, 0.3, 1.5, 0), 0);
  EXPECT_EQ(d.bottleneck, Bottleneck::kStorage) << d.reason;
  EXPECT_NEAR(d.decoder_starved, 0.75, 1e-9);
  // Decoders saturated, readers waiting to hand over.
  d = Diagnose(Evidence(0.01, 1.95, 0.02, 3.5), 0);
  EXPECT_EQ(d.bottleneck, Bottleneck::kDecode) << d.reason;
  // Decoders idle by the clock but readers queued behind them: starved of CPU.
  RunEvidence e = Evidence(0.01, 0.6, 0.05, 3.5);
  e.cpu_s = 0.5;
  d = Diagnose(e, 0);
  EXPECT_EQ(d.bottleneck, Bottleneck::kDecode) << d.reason;
  EXPECT_DOUBLE_EQ(d.cpu_cores_used, 0.5);
  // Fast enough for the step: none, whatever the stages did.
  d = Diagnose(Evidence(0.01, 1.95, 0.02, 3.5), 500);
  EXPECT_EQ(d.bottleneck, Bottleneck::kNone) << d.reason;
  // Nothing saturated: an honest unknown.
  EXPECT_EQ(Diagnose(Evidence(0.1, 0.2, 0.1, 0.1), 0).bottleneck, Bottleneck::kUnknown);
  EXPECT_STREQ(BottleneckName(Bottleneck::kStorage), "storage");
}

}  // namespace
}  // namespace stoker::probes
