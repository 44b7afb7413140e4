// The CPU copy engine is the tests' stand-in for a CUDA stream, so its own
// behaviour is pinned first: copies complete late, in issue order, with the
// bytes the host held; an overwrite while in flight is caught; teardown with
// copies in flight is prompt.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "device/copy_engine.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The delays below are long (1 s) against the microseconds between the
// test's own steps, so that a test thread held off the CPU for a while (a
// loaded machine, a sanitizer) still acts well before a copy is due.
TEST(LateCopyEngineTest, CompletesLateWithTheBytesAndTimesIt) {
  auto engine = MakeLateCopyEngine({.delay_ms = 1000});
  std::vector<uint8_t> host(100000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7);
  Result<void*> dev = engine->AllocateDevice(host.size());
  ASSERT_TRUE(dev.ok());
  std::memset(*dev, 0, host.size());
  const auto t0 = Clock::now();
  auto copy = engine->Issue(host.data(), *dev, host.size(), nullptr);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_FALSE((*copy)->Done());
  EXPECT_FALSE((*copy)->Times().has_value());
  EXPECT_EQ(static_cast<uint8_t*>(*dev)[1], 0) << "copied before its time";
  ASSERT_TRUE((*copy)->NeededOn(0).ok());  // the consumer needs it at once: all of it is exposed
  ASSERT_TRUE((*copy)->Wait().ok());
  EXPECT_GE(SecondsSince(t0), 0.99);
  EXPECT_EQ(std::memcmp(*dev, host.data(), host.size()), 0);
  auto times = (*copy)->Times();
  ASSERT_TRUE(times.has_value());
  EXPECT_GE(times->copy_s, 0.99);
  EXPECT_GE(times->exposed_s, 0.5);  // needed (at once) at most 0.5 s after the issue
  EXPECT_LE(times->exposed_s, times->copy_s);
  EXPECT_EQ(engine->overwrites(), 0u);
  copy->reset();
  engine->FreeDevice(*dev, host.size());
}

TEST(LateCopyEngineTest, ACopyNeededAfterItEndedIsHidden) {
  auto engine = MakeLateCopyEngine({.delay_ms = 5});
  std::vector<uint8_t> host(4096, 3), dev(4096, 0);
  auto copy = engine->Issue(host.data(), dev.data(), host.size(), nullptr);
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE((*copy)->Wait().ok());
  ASSERT_TRUE((*copy)->NeededOn(0).ok());
  auto times = (*copy)->Times();
  ASSERT_TRUE(times.has_value());
  EXPECT_EQ(times->exposed_s, 0.0);
  EXPECT_GT(times->hidden_s(), 0.0);
}

TEST(LateCopyEngineTest, CatchesHostBytesOverwrittenWhileInFlight) {
  // The check the loader's tests rely on must be able to fail.
  auto engine = MakeLateCopyEngine({.delay_ms = 1000});
  std::vector<uint8_t> host(8192, 1), dev(8192, 0);
  auto copy = engine->Issue(host.data(), dev.data(), host.size(), nullptr);
  ASSERT_TRUE(copy.ok());
  host[5000] = 2;  // reused while the copy is in flight
  ASSERT_TRUE((*copy)->Wait().ok());
  EXPECT_EQ(engine->overwrites(), 1u);
}

TEST(LateCopyEngineTest, CompletesInIssueOrderAsAStreamDoes) {
  auto engine = MakeLateCopyEngine({.delay_ms = 20});
  std::vector<uint8_t> a(64, 1), b(64, 2), dev(64, 0);
  auto first = engine->Issue(a.data(), dev.data(), 64, nullptr);
  auto second = engine->Issue(b.data(), dev.data(), 64, nullptr);  // same device buffer: must land last
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*second)->Wait().ok());
  EXPECT_TRUE((*first)->Done());
  EXPECT_EQ(dev[0], 2);
}

TEST(LateCopyEngineTest, TeardownWithCopiesInFlightIsPrompt) {
  auto engine = MakeLateCopyEngine({.delay_ms = 60000});
  std::vector<uint8_t> host(1 << 20, 9), dev(1 << 20, 0);
  std::vector<std::unique_ptr<PendingCopy>> copies;
  for (int i = 0; i < 4; ++i) {
    auto c = engine->Issue(host.data(), dev.data(), host.size(), nullptr);
    ASSERT_TRUE(c.ok());
    copies.push_back(std::move(c).value());
  }
  const auto t0 = Clock::now();
  engine.reset();  // completes what is queued at once
  for (auto& c : copies) EXPECT_TRUE(c->Done());
  copies.clear();
  EXPECT_LT(SecondsSince(t0), 30.0);  // not the minute a copy is due after: it did not wait
  EXPECT_EQ(dev[12345], 9);
}

}  // namespace
}  // namespace stoker
