#include "observe/histogram.h"

#include <gtest/gtest.h>

#include "observe/recorder.h"

namespace stoker {
namespace {

TEST(LatencyHistogramTest, PercentilesLandInTheRightPowerOfTwo) {
  LatencyHistogram h;
  for (int i = 0; i < 90; ++i) h.Record(3'000);        // 3 µs: bucket [2, 4) µs
  for (int i = 0; i < 10; ++i) h.Record(5'000'000);    // 5 ms: bucket [4096, 8192) µs
  auto counts = h.Snapshot();
  double p50 = LatencyHistogram::Percentile(counts, 0.5);
  double p99 = LatencyHistogram::Percentile(counts, 0.99);
  EXPECT_GE(p50, 2e-6);
  EXPECT_LE(p50, 4e-6);
  EXPECT_GE(p99, 4.096e-3);
  EXPECT_LE(p99, 8.192e-3);
  EXPECT_EQ(LatencyHistogram::Percentile(std::vector<uint64_t>(LatencyHistogram::kBuckets, 0), 0.5), 0.0);
}

TEST(RecorderTest, SnapshotsDiffAndTraceIsBounded) {
  Recorder r(/*trace_capacity=*/2);
  r.read.Add(100, 2'000'000);
  r.read.Add(50, 1'000'000);
  r.NameThread(1, "reader 0");
  for (int i = 0; i < 3; ++i) r.AddSpan({SpanKind::kRead, 1, r.start_ns(), r.start_ns() + 1000, i, 0});
  RecorderSnapshot s = r.Snapshot();
  EXPECT_EQ(s.read.items, 2u);
  EXPECT_EQ(s.read.bytes, 150u);
  EXPECT_NEAR(s.read.busy_s, 3e-3, 1e-9);
  EXPECT_EQ(s.spans_dropped, 1u);
  std::string json = r.TraceJson();
  EXPECT_NE(json.find("\"thread_name\""), std::string::npos);
  EXPECT_NE(json.find("\"batch\":2"), std::string::npos);
  EXPECT_EQ(json.find("\"batch\":0"), std::string::npos);  // the oldest span was dropped
}

}  // namespace
}  // namespace stoker
