// A stand-in libcudart for tests on machines without a GPU: the functions
// device/cuda_runtime.h resolves, with host memory as "device" memory and
// copies done at once. It proves on CPU that the symbol table resolves, that
// the CUDA copy engine's calls are wired (offsets, pinning, unpinning, event
// timings, stream waits) and that a device="cuda" loader delivers the CPU
// loader's bytes — not that a GPU does; that awaits a device (issue 21).
// Loaded through STOKER_CUDART; tests read its counters with dlsym.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {
std::mutex mu;
std::map<const char*, size_t, std::less<>> registered;  // guarded by mu: start → bytes
std::atomic<long> live_allocations{0}, pageable_copies{0}, copies{0}, stream_waits{0};

uint64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
struct FakeEvent {
  uint64_t ns = 0;
};
bool IsRegistered(const void* p, size_t n) {
  std::lock_guard lock(mu);
  const char* c = static_cast<const char*>(p);
  auto it = registered.upper_bound(c);
  if (it == registered.begin()) return false;
  --it;
  return c >= it->first && c + n <= it->first + it->second;
}
}  // namespace

extern "C" {
int cudaGetDeviceCount(int* n) {
  const char* env = getenv("FAKE_CUDA_DEVICES");
  *n = env ? atoi(env) : 1;
  return *n > 0 ? 0 : 100;  // cudaErrorNoDevice
}
int cudaSetDevice(int) { return 0; }
int cudaGetDevice(int* d) {
  *d = 0;
  return 0;
}
const char* cudaGetErrorString(int e) { return e == 100 ? "no CUDA-capable device is detected" : "fake error"; }
int cudaHostRegister(void* p, size_t n, unsigned) {
  std::lock_guard lock(mu);
  return registered.emplace(static_cast<const char*>(p), n).second ? 0 : 712;  // already registered
}
int cudaHostUnregister(void* p) {
  std::lock_guard lock(mu);
  return registered.erase(static_cast<const char*>(p)) ? 0 : 713;  // not registered
}
int cudaMalloc(void** p, size_t n) {
  *p = malloc(n);
  live_allocations++;
  return *p ? 0 : 2;
}
int cudaFree(void* p) {
  free(p);
  live_allocations--;
  return 0;
}
int cudaStreamCreateWithFlags(void** s, unsigned) {
  *s = new int(0);
  return 0;
}
int cudaStreamDestroy(void* s) {
  delete static_cast<int*>(s);
  return 0;
}
int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void*) {
  if (kind != 1) return 21;  // cudaErrorInvalidMemcpyDirection
  if (!IsRegistered(src, n)) pageable_copies++;
  memcpy(dst, src, n);
  copies++;
  return 0;
}
int cudaEventCreateWithFlags(void** e, unsigned) {
  *e = new FakeEvent;
  return 0;
}
int cudaEventDestroy(void* e) {
  delete static_cast<FakeEvent*>(e);
  return 0;
}
int cudaEventRecord(void* e, void*) {
  static_cast<FakeEvent*>(e)->ns = Now();
  return 0;
}
int cudaEventQuery(void*) { return 0; }
int cudaEventSynchronize(void*) { return 0; }
int cudaEventElapsedTime(float* ms, void* a, void* b) {
  *ms = static_cast<float>(static_cast<double>(static_cast<int64_t>(static_cast<FakeEvent*>(b)->ns -
                                                                    static_cast<FakeEvent*>(a)->ns)) * 1e-6);
  return 0;
}
int cudaStreamWaitEvent(void*, void*, unsigned) {
  stream_waits++;
  return 0;
}
int cudaStreamSynchronize(void*) { return 0; }

// Test counters.
long fake_cuda_registered() {
  std::lock_guard lock(mu);
  return static_cast<long>(registered.size());
}
long fake_cuda_live_allocations() { return live_allocations; }
long fake_cuda_pageable_copies() { return pageable_copies; }
long fake_cuda_copies() { return copies; }
long fake_cuda_stream_waits() { return stream_waits; }
}
