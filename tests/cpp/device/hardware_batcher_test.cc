// The hardware decoder's worker (device/hardware_batcher.h), with a "hardware"
// that records its batches: queued requests are combined into batches of
// whole units, capped, each image in exactly one batch, in queue order; a
// failed batch fails only its requests; a batch that never returns is given
// up on after the bound, its requests abandoned, the queued ones answered,
// every later one refused at once, and the failure said. Runs under
// ThreadSanitizer (scripts/sanitize.sh).
#include "device/hardware_batcher.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace stoker {
namespace {

// `n` images whose "bytes" are the numbers first..first+n-1 (as addresses), and whose output is a flag.
struct Images {
  std::vector<HardwareImage> images;
  std::vector<uint8_t> out;
  Images(int first, int n) : out(static_cast<size_t>(n), 0) {
    for (int i = 0; i < n; ++i) {
      HardwareImage im;
      im.bytes = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(first + i + 1));
      im.length = 1;
      im.out = &out[static_cast<size_t>(i)];
      images.push_back(im);
    }
  }
};

struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<uintptr_t>> batches;  // guarded by mu
  bool gate_open = true;                        // guarded by mu: false holds every batch
  int hang_at = -1;                             // guarded by mu: this batch never returns until released
  bool released = false;                        // guarded by mu
  int fail_at = -1;                             // guarded by mu

  Status Run(std::span<const HardwareImage> batch) {
    std::unique_lock lock(mu);
    const int index = static_cast<int>(batches.size());
    std::vector<uintptr_t> ids;
    for (const HardwareImage& im : batch) ids.push_back(reinterpret_cast<uintptr_t>(im.bytes));
    batches.push_back(ids);
    cv.wait(lock, [&] { return gate_open; });
    if (index == hang_at) {
      cv.wait(lock, [&] { return released; });
      return Cancelled("released");
    }
    if (index == fail_at) return Internal("the hardware failed its batch");
    for (const HardwareImage& im : batch) *im.out = 1;
    return Status::Ok();
  }
  void Release() {
    std::lock_guard lock(mu);
    released = true;
    gate_open = true;
    cv.notify_all();
  }
};

HardwareBatcher::Run RunOf(Recorder* r) {
  return [r](std::span<const HardwareImage> b) { return r->Run(b); };
}

TEST(HardwareBatcherTest, QueuedRequestsCombineIntoWholeUnitsInQueueOrder) {
  Recorder rec;
  rec.gate_open = false;  // the first batch waits, so the rest queue behind it
  HardwareBatcherOptions o;
  o.unit = 7;
  o.max_batch = 14;
  o.min_bound_s = 30;
  HardwareBatcher batcher(RunOf(&rec), o);
  std::vector<Images> reqs;
  for (int r = 0; r < 5; ++r) reqs.emplace_back(r * 8, 8);  // 40 images, 8 a request
  std::vector<HardwareBatcher::Outcome> outcomes(reqs.size());
  std::vector<std::thread> threads;
  threads.emplace_back([&] { outcomes[0] = batcher.Decode(reqs[0].images, nullptr); });
  while (true) {  // the first request's batch is in the hardware
    {
      std::lock_guard lock(rec.mu);
      if (!rec.batches.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (size_t r = 1; r < reqs.size(); ++r) {
    threads.emplace_back([&, r] { outcomes[r] = batcher.Decode(reqs[r].images, nullptr); });
  }
  // All queued behind it (1 left of the first, 32 of the others); their order does not matter below.
  while (batcher.queued_images() < 33) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rec.Release();
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < reqs.size(); ++r) {
    EXPECT_EQ(outcomes[r], HardwareBatcher::Outcome::kDecoded);
    for (uint8_t v : reqs[r].out) EXPECT_EQ(v, 1);
  }
  // First batch: 8 images = one unit of 7 (the eighth waits for the next); then whole units up to 14.
  std::vector<int> seen(41, 0);
  int whole = 0;
  for (const auto& b : rec.batches) {
    EXPECT_LE(b.size(), 14u);
    if (b.size() % 7 == 0) ++whole;
    for (uintptr_t id : b) ++seen[id];
  }
  EXPECT_EQ(rec.batches[0].size(), 7u);
  // Then 33 queued at once: 14, 14, and the 5 left (short: nothing else is queued).
  ASSERT_EQ(rec.batches.size(), 4u);
  EXPECT_EQ(rec.batches[1].size(), 14u);
  EXPECT_EQ(rec.batches[2].size(), 14u);
  EXPECT_EQ(rec.batches[3].size(), 5u);
  EXPECT_EQ(whole, 3);
  for (int id = 1; id <= 40; ++id) EXPECT_EQ(seen[id], 1) << id;
  EXPECT_EQ(batcher.batches(), rec.batches.size());
  EXPECT_FALSE(batcher.dead());
}

TEST(HardwareBatcherTest, AFailedBatchFailsItsRequestsOnly) {
  Recorder rec;
  rec.fail_at = 0;
  HardwareBatcher batcher(RunOf(&rec), {});
  Images a(0, 3), b(3, 3);
  Status error;
  EXPECT_EQ(batcher.Decode(a.images, &error), HardwareBatcher::Outcome::kFailed);
  EXPECT_NE(error.message().find("failed its batch"), std::string::npos);
  EXPECT_EQ(batcher.Decode(b.images, &error), HardwareBatcher::Outcome::kDecoded);
  EXPECT_FALSE(batcher.dead());
  EXPECT_EQ(batcher.failure(), "");
}

TEST(HardwareBatcherTest, ABatchThatNeverReturnsIsGivenUpOnOnce) {
  Recorder rec;
  rec.hang_at = 1;
  HardwareBatcherOptions o;
  o.name = "test decoder";
  o.min_bound_s = o.first_bound_s = 0.2;
  auto batcher = std::make_unique<HardwareBatcher>(RunOf(&rec), o);
  Images first(0, 4), hung(4, 4), later(8, 4);
  EXPECT_EQ(batcher->Decode(first.images, nullptr), HardwareBatcher::Outcome::kDecoded);
  EXPECT_EQ(batcher->Decode(hung.images, nullptr), HardwareBatcher::Outcome::kAbandoned);
  EXPECT_TRUE(batcher->dead());
  EXPECT_NE(batcher->failure().find("test decoder: a hardware batch of 4 images did not return"), std::string::npos)
      << batcher->failure();
  EXPECT_EQ(batcher->Decode(later.images, nullptr), HardwareBatcher::Outcome::kDead);  // refused at once
  {
    std::lock_guard lock(rec.mu);
    EXPECT_EQ(rec.batches.size(), 2u);  // the later request never reached the hardware
  }
  rec.Release();  // the hung call returns; the worker ends
  batcher.reset();
}

}  // namespace
}  // namespace stoker
