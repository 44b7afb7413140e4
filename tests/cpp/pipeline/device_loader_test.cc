// Batches to a device, proven on CPU: with the late copy engine
// (device="cpu-late", device/copy_engine.h) standing for a CUDA stream, the
// stream of batches equals the host loader's, no pool slot is rewritten
// while its copy is in flight, device buffers stay within prefetch + 1,
// copies are timed (hidden vs exposed) and a loader torn down with copies in
// flight returns promptly. device="cuda" without CUDA is a clear error; with
// the stand-in runtime (tests/cpp/device/fake_cudart.cc) the CUDA engine's
// path delivers the same bytes from page-locked buffers.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "device/cuda_runtime.h"
#include "formats/tar.h"
#include "pipeline/drain_batches.h"
#include "stoker/loader.h"

namespace stoker {
namespace {

// 4 shards x 24 samples: "k<i>.cls" = "<i>", "k<i>.bin" = 3000 bytes derived from i.
// Samples in `bad` hold "x" as their cls.
std::string MakeShards(const std::set<int>& bad = {}) {
  char tmpl[] = "/tmp/stoker-device-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  for (int s = 0; s < 4; ++s) {
    auto w = TarWriter::Create(dir + "/s" + std::to_string(s) + ".tar");
    EXPECT_TRUE(w.ok());
    for (int i = s * 24; i < (s + 1) * 24; ++i) {
      std::string v = bad.count(i) ? "x" : std::to_string(i);
      std::string bin(3000, '\0');
      for (size_t j = 0; j < bin.size(); ++j) bin[j] = static_cast<char>((i * 31 + j * 7) & 0xff);
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".bin", {reinterpret_cast<const uint8_t*>(bin.data()), bin.size()}).ok());
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(v.data()), v.size()}).ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return dir + "/s{0..3}.tar";
}

LoaderOptions Options(const std::string& shards, const std::string& device, int prefetch = 2) {
  LoaderOptions o;
  o.sources = {shards};
  o.fields = {BytesField("bin", 4096), ScalarField("cls", DType::kI64)};
  o.batch_size = 8;
  o.shuffle = true;
  o.seed = 11;
  o.decode_threads = 2;
  o.prefetch_batches = prefetch;
  o.device = device;
  o.late_copy_ms = 15;
  return o;
}

using test_data::Drain;

// The rank's batches made by two loaders of alternate batches (batch_stride
// 2, as Ray workers; host batches) and finished by `receiver`, a loader of
// none of them (Loader::Receive), as bytes in delivery order.
std::vector<std::string> DrainReceived(LoaderOptions shares, Loader& receiver) {
  shares.device = "cpu";
  shares.batch_stride = 2;
  shares.leave_failed_slots = shares.on_error == OnError::kSkip;
  std::vector<std::unique_ptr<Loader>> parts;
  int64_t batches = 0;
  for (int j : {0, 1}) {
    shares.batch_offset = j;
    auto part = Loader::Create(shares);
    EXPECT_TRUE(part.ok()) << part.status().ToString();
    if (!part.ok()) return {};
    batches += (*part)->plan().batches;
    parts.push_back(std::move(*part));
  }
  std::vector<std::string> out;
  for (int64_t b = 0; b < batches; ++b) {
    auto made = parts[b % 2]->Next();
    EXPECT_TRUE(made.ok() && *made) << made.status().ToString();
    if (!made.ok() || !*made) break;
    auto batch = receiver.Receive({b, (*made)->arrays(), (*made)->keys(), (*made)->urls(), (*made)->failures()});
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    EXPECT_TRUE((*batch)->NeededOn(0).ok());
    std::string bytes;
    for (const ArrayView& a : (*batch)->arrays()) bytes.append(reinterpret_cast<const char*>(a.data), a.nbytes);
    out.push_back(std::move(bytes));
  }
  return out;
}

TEST(DeviceLoaderTest, LateCopiesDeliverTheHostStreamAndNeverRewriteASlotInFlight) {
  const std::string shards = MakeShards();
  auto cpu = Loader::Create(Options(shards, "cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::vector<std::string> expected = Drain(**cpu);
  ASSERT_EQ(expected.size(), 12u);
  for (int prefetch : {1, 3}) {
    auto dev = Loader::Create(Options(shards, "cpu-late", prefetch));
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    for (uint64_t epoch : {0, 1}) {
      ASSERT_TRUE((*dev)->SetEpoch(epoch).ok());
      std::vector<std::string> got = Drain(**dev);
      if (epoch == 0) {
        EXPECT_TRUE(got == expected) << "prefetch " << prefetch;
      }
      EXPECT_EQ(got.size(), 12u);
    }
    // A consumer that drops batches unread: their copies are still in
    // flight when released, and their slots must wait for them.
    ASSERT_TRUE((*dev)->SetEpoch(2).ok());
    for (int i = 0; i < 6; ++i) {
      auto skipped = (*dev)->Next();
      ASSERT_TRUE(skipped.ok() && *skipped);
    }
    RecorderSnapshot s = (*dev)->Stats();
    EXPECT_EQ(s.h2d_overwrites, 0u) << "a batch buffer was rewritten while its copy was in flight";
    EXPECT_GE(s.h2d_copies, 24u);
    EXPECT_LE(s.device_buffers_peak, prefetch + 1) << "device memory beyond prefetch + the batch in use";
    EXPECT_GT(s.h2d_s, 0.0);
    EXPECT_LE(s.h2d_exposed_s, s.h2d_s);
  }
}

TEST(DeviceLoaderTest, SkippedSlotsAreRefilledBeforeTheCopy) {
  const std::string shards = MakeShards({5, 30, 77});
  LoaderOptions o = Options(shards, "cpu");
  o.on_error = OnError::kSkip;
  auto cpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok());
  std::vector<std::string> expected = Drain(**cpu);
  o.device = "cpu-late";
  auto dev = Loader::Create(o);
  ASSERT_TRUE(dev.ok());
  EXPECT_TRUE(Drain(**dev) == expected);
  EXPECT_EQ((*dev)->Stats().h2d_overwrites, 0u);
  EXPECT_EQ((*dev)->Skips().skipped, 3);
}

// Received batches (Ray workers') take the receiver's device stage: refilled
// in the rank's order, then copied, never a slot rewritten in flight.
TEST(DeviceLoaderTest, ReceivedBatchesAreRefilledThenCopiedAsTheLocalLoaders) {
  const std::string shards = MakeShards({5, 30, 77});
  LoaderOptions o = Options(shards, "cpu");
  o.on_error = OnError::kSkip;
  auto cpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok());
  std::vector<std::string> expected = Drain(**cpu);
  LoaderOptions none = o;
  none.device = "cpu-late";
  none.batch_share = 0;
  auto receiver = Loader::Create(none);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  EXPECT_TRUE(DrainReceived(o, **receiver) == expected);
  RecorderSnapshot s = (*receiver)->Stats();
  EXPECT_EQ(s.h2d_overwrites, 0u);
  EXPECT_EQ(s.h2d_copies, expected.size());
  EXPECT_EQ((*receiver)->Skips().skipped, 3);
}

TEST(DeviceLoaderTest, HeldBatchesKeepTheirBytesAndBoundDeviceBuffersByHostLeases) {
  // list(loader): the caller keeps every batch; the pool lends overflow
  // buffers, each batch keeps its own device buffer, and its bytes.
  const std::string shards = MakeShards();
  auto cpu = Loader::Create(Options(shards, "cpu"));
  ASSERT_TRUE(cpu.ok());
  std::vector<std::string> expected = Drain(**cpu);
  auto dev = Loader::Create(Options(shards, "cpu-late", 1));
  ASSERT_TRUE(dev.ok());
  std::vector<std::shared_ptr<Batch>> held;
  while (true) {
    auto b = (*dev)->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (!*b) break;
    held.push_back(*b);
  }
  ASSERT_EQ(held.size(), expected.size());
  for (size_t i = 0; i < held.size(); ++i) {
    std::string bytes;
    ASSERT_TRUE(held[i]->NeededOn(0).ok());
    for (const ArrayView& a : held[i]->arrays()) bytes.append(reinterpret_cast<const char*>(a.data), a.nbytes);
    EXPECT_TRUE(bytes == expected[i]) << "batch " << i;
  }
  // Each held batch owns one device buffer; besides them only the next
  // epoch's first batches, prepared as this one ends, may hold copies.
  const int64_t buffers = (*dev)->Stats().device_buffers;
  EXPECT_GE(buffers, static_cast<int64_t>(held.size()));
  EXPECT_LE(buffers, static_cast<int64_t>(held.size()) + 1 /* prefetch */);
  held.clear();  // overflow buffers are freed, the pool's kept
  EXPECT_LE((*dev)->Stats().device_buffers, 2);
  EXPECT_EQ((*dev)->Stats().h2d_overwrites, 0u);
}

TEST(DeviceLoaderTest, TeardownWithCopiesInFlightIsPrompt) {
  // Teardown waits for the copies in flight (each reads a pinned host buffer
  // the loader is about to free: device_stage.h), and for nothing else. Here
  // each copy completes 2 s after it was issued, all of them issued before
  // the teardown starts, so a prompt teardown ends within 2 s plus its own
  // work (milliseconds; more under a sanitizer or on a loaded machine). The
  // bound, 2 s more, is ten times that work at its slowest and fails a
  // teardown that waits a copy's time again (or a poll period) on top.
  constexpr int kCopyMs = 2000;
  const std::string shards = MakeShards();
  LoaderOptions o = Options(shards, "cpu-late", 4);
  o.late_copy_ms = kCopyMs;
  auto dev = Loader::Create(o);
  ASSERT_TRUE(dev.ok());
  auto first = (*dev)->Next();  // waits for nothing but the batch: the copy is the consumer's to wait on
  ASSERT_TRUE(first.ok() && *first);
  // The next batches' copies are in flight: their device buffers exist.
  // (Counted, not slept for: on a loaded machine 50 ms may issue none.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*dev)->Stats().device_buffers < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE((*dev)->Stats().device_buffers, 3) << "no later batch's copy was issued";
  const auto t0 = std::chrono::steady_clock::now();
  dev->reset();
  first->reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2 * kCopyMs / 1000.0) << "teardown took " << s << " s with copies of " << kCopyMs << " ms in flight";
}

TEST(DeviceLoaderTest, CudaWithoutCudaIsAClearError) {
  // This image has a CUDA runtime (/usr/local/cuda) but no GPU; a machine
  // may also have neither. Either way: FailedPrecondition, saying so.
  setenv("STOKER_CUDART", "/nonexistent/libcudart.so.12", 1);  // none
  auto none = Loader::Create(Options("/nonexistent/never-opened-{0..3}.tar", "cuda"));
  unsetenv("STOKER_CUDART");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("device=\"cuda\" needs CUDA: no CUDA runtime (libcudart) found"),
            std::string::npos) << none.status().message();
  int devices = 0;  // the machine's own runtime, if any
  for (const char* name : {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      auto count = reinterpret_cast<int (*)(int*)>(dlsym(h, "cudaGetDeviceCount"));
      if (count == nullptr || count(&devices) != 0) devices = 0;
      break;
    }
  }
  if (devices > 0) GTEST_SKIP() << "this machine has a CUDA device";
  auto dev = Loader::Create(Options("/nonexistent/never-opened-{0..3}.tar", "cuda"));
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = dev.status().message();
  EXPECT_NE(m.find("device=\"cuda\" needs CUDA"), std::string::npos) << m;
  EXPECT_NE(m.find("libcudart"), std::string::npos) << m;
  // pin_memory without CUDA has no effect, as torch's.
  LoaderOptions o = Options(MakeShards(), "cpu");
  o.pin_memory = true;
  auto pinned = Loader::Create(o);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ((*pinned)->Stats().pinned_buffers, 0);
  auto bad = Loader::Create(Options(MakeShards(), "gpu"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected \"cpu\", \"cuda\" or \"cuda:N\""), std::string::npos);
}

TEST(DeviceLoaderTest, CudaEngineOnTheStandInRuntimePinsAndDeliversTheHostBytes) {
  setenv("STOKER_CUDART", STOKER_FAKE_CUDART, 1);
  Result<const cuda::Runtime*> rt = cuda::LoadCudaRuntime(false);
  if (!rt.ok() || (*rt)->path.find("cudart_fake") == std::string::npos) {
    unsetenv("STOKER_CUDART");  // the runtime is loaded once per process; ctest runs each test alone
    GTEST_SKIP() << "another CUDA runtime was loaded first in this process";
  }
  const std::string shards = MakeShards();
  auto cpu = Loader::Create(Options(shards, "cpu"));
  ASSERT_TRUE(cpu.ok());
  std::vector<std::string> expected = Drain(**cpu);
  auto dev = Loader::Create(Options(shards, "cuda", 2));
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_TRUE(Drain(**dev) == expected);
  RecorderSnapshot s = (*dev)->Stats();
  // The pool makes its buffers as they are first needed (timing decides how
  // many of prefetch + 1), and every one it made is page-locked.
  EXPECT_GE(s.pinned_buffers, 1);
  EXPECT_LE(s.pinned_buffers, 3);
  EXPECT_LE(s.device_buffers_peak, 3);
  EXPECT_EQ(s.h2d_copies, expected.size());
  void* fake = dlopen(STOKER_FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  auto pageable = reinterpret_cast<long (*)()>(dlsym(fake, "fake_cuda_pageable_copies"));
  auto registered = reinterpret_cast<long (*)()>(dlsym(fake, "fake_cuda_registered"));
  auto live = reinterpret_cast<long (*)()>(dlsym(fake, "fake_cuda_live_allocations"));
  EXPECT_EQ(pageable(), 0);
  EXPECT_EQ(registered(), s.pinned_buffers);
  dev->reset();
  EXPECT_EQ(registered(), 0) << "pool buffers not unregistered when freed";
  EXPECT_EQ(live(), 0) << "device buffers leaked";
  // Batches made by other loaders (Ray workers), received: the same path, from page-locked buffers.
  LoaderOptions none = Options(shards, "cuda", 2);
  none.batch_share = 0;
  auto receiver = Loader::Create(none);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  EXPECT_TRUE(DrainReceived(Options(shards, "cpu"), **receiver) == expected);
  EXPECT_EQ((*receiver)->Stats().h2d_copies, expected.size());
  EXPECT_EQ(pageable(), 0);
  EXPECT_GE(registered(), 1);
  receiver->reset();
  EXPECT_EQ(registered(), 0);
  EXPECT_EQ(live(), 0);
  // pin_memory alone: page-locked host batches.
  LoaderOptions o = Options(shards, "cpu");
  o.pin_memory = true;
  auto pinned = Loader::Create(o);
  ASSERT_TRUE(pinned.ok());
  EXPECT_TRUE(Drain(**pinned) == expected);
  const int64_t pinned_buffers = (*pinned)->Stats().pinned_buffers;
  EXPECT_GE(pinned_buffers, 1);
  EXPECT_LE(pinned_buffers, 3);
  EXPECT_EQ(registered(), pinned_buffers);
  unsetenv("STOKER_CUDART");
}

}  // namespace
}  // namespace stoker
