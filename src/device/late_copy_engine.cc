// device/late_copy_engine.cc — the CPU copy engine of copy_engine.h, for
// tests on machines without a GPU.
//
// It behaves as a CUDA stream does where that matters to the loader: copies
// complete asynchronously, in issue order, on a thread of the engine's own,
// no earlier than delay_ms after they were issued. The bytes are copied at
// completion, and checksummed both at issue and then: a difference means the
// loader reused (overwrote) a batch buffer while its copy was in flight — on
// a GPU, a batch with bytes of the next one. Each is counted (overwrites())
// and logged to stderr once.
// Teardown: the destructor completes every copy still queued at once (no
// delay), so no PendingCopy waits forever, and joins the thread.
// Thread-safety: any thread; the queue and each copy's state are guarded by mu.
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "device/copy_engine.h"

namespace stoker {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t Now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// A fast 64-bit checksum of the bytes (word-wise multiply-xor; a changed
// byte changes it with overwhelming probability).
uint64_t Checksum(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

struct Job {
  const uint8_t* host;
  uint8_t* device;
  size_t bytes;
  uint64_t checksum;
  uint64_t issued_ns;
  uint64_t due_ns;
  StreamWork then;  // after the bytes are copied
  // Guarded by State::mu.
  Status status;
  bool done = false;
  uint64_t end_ns = 0;
  uint64_t needed_ns = 0;  // 0: not needed yet
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;  // guarded by mu; issue order
  bool stop = false;                       // guarded by mu
  std::atomic<uint64_t> overwrites{0};

  void Complete(Job& job) {  // worker thread, mu not held
    if (Checksum(job.host, job.bytes) != job.checksum) {
      if (overwrites.fetch_add(1) == 0) {
        fprintf(stderr, "stoker: late copy engine: host buffer %p (%zu bytes) was overwritten while its copy "
                        "was in flight\n", static_cast<const void*>(job.host), job.bytes);
      }
    }
    std::memcpy(job.device, job.host, job.bytes);
    Status st = job.then ? job.then(0) : Status::Ok();
    std::lock_guard lock(mu);
    job.status = std::move(st);
    job.done = true;
    job.end_ns = Now();
    cv.notify_all();
  }

  void Run() {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopped, nothing left
      std::shared_ptr<Job> job = queue.front();
      // Sleep until due; a stop completes the rest at once.
      const auto due = Clock::time_point(std::chrono::nanoseconds(job->due_ns));
      cv.wait_until(lock, due, [&] { return stop; });
      queue.pop_front();
      lock.unlock();
      Complete(*job);
      lock.lock();
    }
  }
};

class LateCopy : public PendingCopy {
 public:
  LateCopy(std::shared_ptr<State> state, std::shared_ptr<Job> job) : state_(std::move(state)), job_(std::move(job)) {}
  ~LateCopy() override { (void)Wait(); }
  bool Done() override {
    std::lock_guard lock(state_->mu);
    return job_->done;
  }
  Status Wait() override {
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] { return job_->done; });
    return job_->status;
  }
  // The consumer here is the host (its "stream" is the calling thread): it
  // waits for the copy, and that wait is the exposed time.
  Status NeededOn(uintptr_t) override {
    std::unique_lock lock(state_->mu);
    if (job_->needed_ns == 0) job_->needed_ns = Now();
    state_->cv.wait(lock, [&] { return job_->done; });
    return job_->status;
  }
  std::optional<CopyTimes> Times() override {
    std::lock_guard lock(state_->mu);
    if (!job_->done) return std::nullopt;
    CopyTimes t;
    t.copy_s = static_cast<double>(job_->end_ns - job_->issued_ns) * 1e-9;
    if (job_->needed_ns != 0 && job_->end_ns > job_->needed_ns) {
      t.exposed_s = static_cast<double>(job_->end_ns - job_->needed_ns) * 1e-9;
    }
    t.end_ns = job_->end_ns;
    return t;
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Job> job_;
};

class LateCopyEngine : public CopyEngine {
 public:
  explicit LateCopyEngine(LateCopyOptions options)
      : options_(options), state_(std::make_shared<State>()), thread_([s = state_] { s->Run(); }) {}
  ~LateCopyEngine() override {
    {
      std::lock_guard lock(state_->mu);
      state_->stop = true;
      state_->cv.notify_all();
    }
    thread_.join();
  }
  std::string name() const override { return "cpu-late"; }
  int device() const override { return -1; }
  Result<void*> AllocateDevice(size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + (bytes == 0 ? 4096 : 0));
    if (p == nullptr) return Internal("late copy engine: out of memory for a " + std::to_string(bytes) + "-byte buffer");
    return p;
  }
  void FreeDevice(void* p, size_t) override { std::free(p); }
  bool PinHost(void*, size_t) override { return true; }
  void UnpinHost(void*) override {}
  Result<std::unique_ptr<PendingCopy>> Issue(const void* host, void* device, size_t bytes,
                                             const std::shared_ptr<ReleaseFence>&, StreamWork then) override {
    auto job = std::make_shared<Job>();
    job->host = static_cast<const uint8_t*>(host);
    job->device = static_cast<uint8_t*>(device);
    job->bytes = bytes;
    job->checksum = Checksum(job->host, bytes);
    job->issued_ns = Now();
    job->due_ns = job->issued_ns + static_cast<uint64_t>(options_.delay_ms) * 1000000ull;
    job->then = std::move(then);
    {
      std::lock_guard lock(state_->mu);
      if (state_->stop) return Cancelled("late copy engine is shut down");
      state_->queue.push_back(job);
      state_->cv.notify_all();
    }
    return std::unique_ptr<PendingCopy>(new LateCopy(state_, std::move(job)));
  }
  // Stream order already keeps a copy behind every earlier use here.
  std::shared_ptr<ReleaseFence> Released(uintptr_t) override { return nullptr; }
  uint64_t overwrites() const override { return state_->overwrites.load(); }

 private:
  const LateCopyOptions options_;
  std::shared_ptr<State> state_;  // shared with the thread and every LateCopy (which may outlive the engine)
  std::thread thread_;
};

}  // namespace

std::shared_ptr<CopyEngine> MakeLateCopyEngine(LateCopyOptions options) {
  return std::make_shared<LateCopyEngine>(options);
}

}  // namespace stoker
