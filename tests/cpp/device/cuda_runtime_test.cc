// The CUDA runtime found at run time: a clear error naming every place tried
// where there is none (the CPU CI machine), a library without the runtime's
// symbols refused by name, and the CUDA copy engine's calls run against the
// stand-in runtime (fake_cudart.cc). Each TEST runs in its own process under
// ctest (gtest_discover_tests), so the process-wide runtime is loaded afresh.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <vector>

#include "device/copy_engine.h"
#include "device/cuda_runtime.h"

namespace stoker {
namespace {

// True when the machine has a CUDA runtime of its own (then the "none here"
// tests have nothing to check).
bool SystemHasCudaRuntime() {
  for (const char* name : {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(h);
      return true;
    }
  }
  return false;
}

TEST(CudaRuntimeTest, NoneHereIsAClearErrorNamingWhereItLooked) {
  // $STOKER_CUDART, when set, is the only place tried: a machine with a
  // runtime of its own (this image has /usr/local/cuda's) checks the error too.
  setenv("STOKER_CUDART", "/nonexistent/libcudart.so.12", 1);
  Result<const cuda::Runtime*> rt = cuda::LoadCudaRuntime();
  unsetenv("STOKER_CUDART");
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = rt.status().message();
  EXPECT_NE(m.find("no CUDA runtime (libcudart) found"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent/libcudart.so.12 ("), std::string::npos) << m;  // with dlopen's reason
}

TEST(CudaRuntimeTest, TheSearchNamesTheDirectoriesAndTheSystemsNames) {
  if (SystemHasCudaRuntime()) GTEST_SKIP() << "this machine has a CUDA runtime of its own";
  cuda::AddCudaSearchDirs({"/nonexistent-site-packages/torch/lib"});
  Result<const cuda::Runtime*> rt = cuda::LoadCudaRuntime();
  ASSERT_FALSE(rt.ok());
  const std::string& m = rt.status().message();
  EXPECT_NE(m.find("/nonexistent-site-packages/torch/lib/libcudart.so* (none there)"), std::string::npos) << m;
  EXPECT_NE(m.find("libcudart.so.12 ("), std::string::npos) << m;
  Result<std::shared_ptr<CopyEngine>> engine = MakeCudaCopyEngine(0);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kFailedPrecondition);
}

TEST(CudaRuntimeTest, ALibraryWithoutTheRuntimeSymbolsIsRefusedByName) {
  setenv("STOKER_CUDART", "libz.so.1", 1);  // loads, but is not a CUDA runtime
  Result<const cuda::Runtime*> rt = cuda::LoadCudaRuntime(false);
  unsetenv("STOKER_CUDART");
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("libz.so.1 (lacks cudaGetDeviceCount)"), std::string::npos)
      << rt.status().message();
}

template <typename F>
F FakeCounter(const char* name) {
  void* h = dlopen(STOKER_FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr);
  return reinterpret_cast<F>(dlsym(h, name));
}

TEST(CudaRuntimeTest, ResolvesTheTableAndRunsTheCopyEngineOnTheStandIn) {
  setenv("STOKER_CUDART", STOKER_FAKE_CUDART, 1);
  Result<const cuda::Runtime*> rt = cuda::LoadCudaRuntime();
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_NE((*rt)->path.find("cudart_fake"), std::string::npos) << (*rt)->path;

  Result<std::shared_ptr<CopyEngine>> made = MakeCudaCopyEngine(0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  CopyEngine& engine = **made;
  EXPECT_EQ(engine.device(), 0);
  auto registered = FakeCounter<long (*)()>("fake_cuda_registered");
  auto pageable = FakeCounter<long (*)()>("fake_cuda_pageable_copies");
  auto waits = FakeCounter<long (*)()>("fake_cuda_stream_waits");

  std::vector<uint8_t> host(1 << 16);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(engine.PinHost(host.data(), host.size()));
  EXPECT_EQ(registered(), 1);
  Result<void*> dev = engine.AllocateDevice(host.size());
  ASSERT_TRUE(dev.ok());
  auto copy = engine.Issue(host.data(), *dev, host.size(), nullptr);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  ASSERT_TRUE((*copy)->NeededOn(0).ok());
  EXPECT_EQ(waits(), 1);  // the consumer's stream waits on the copy's event
  ASSERT_TRUE((*copy)->Wait().ok());
  EXPECT_EQ(std::memcmp(*dev, host.data(), host.size()), 0);
  EXPECT_EQ(pageable(), 0);  // copied out of the page-locked buffer
  auto times = (*copy)->Times();
  ASSERT_TRUE(times.has_value());
  EXPECT_GE(times->copy_s, 0.0);
  // A copy into a buffer released by a consumer waits on that release.
  std::shared_ptr<ReleaseFence> fence = engine.Released(0);
  ASSERT_NE(fence, nullptr);
  auto again = engine.Issue(host.data(), *dev, host.size(), fence);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(waits(), 2);
  again->reset();
  copy->reset();
  engine.UnpinHost(host.data());
  EXPECT_EQ(registered(), 0);
  engine.FreeDevice(*dev, host.size());
  unsetenv("STOKER_CUDART");
}

TEST(CudaRuntimeTest, NoDeviceIsAClearError) {
  setenv("STOKER_CUDART", STOKER_FAKE_CUDART, 1);
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  Result<std::shared_ptr<CopyEngine>> engine = MakeCudaCopyEngine(0);
  unsetenv("FAKE_CUDA_DEVICES");
  unsetenv("STOKER_CUDART");
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("reports no usable CUDA device"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace stoker
