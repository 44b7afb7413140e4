// pipeline/device_stage.h — the last two stages: pinned batch buffers and
// their copy to a device, issued as soon as each batch is assembled.
//
//   decoders ──(last sample of batch b done)──▶ OnReady(b): copy b on the
//   engine's stream ──▶ NextReady (in order) ──▶ Deliver: a Batch viewing the
//   device buffer ──▶ consumer: NeededOn(stream) makes its stream wait on b's
//   copy (no host sync) ──▶ released: the host lease and the device buffer go back.
//
// Why the copy starts on the decoder thread that completes the batch: the
// batch may wait in the ready queue while the consumer runs a step; its copy
// then overlaps that step instead of starting when the consumer asks. A
// batch with failed slots is copied at delivery instead, after on_error=skip
// refilled them (refills write the host buffer).
//
// Bounds: a device buffer is taken for a batch that holds a host lease and
// returned when that batch is released, so device buffers never outnumber
// host leases: prefetch + 1 (the batch in use included), plus the overflow
// the host pool lends a caller that keeps every batch. The host lease goes
// back only after the copy completed: a DeviceCopy is destroyed (waiting for
// its copy) before the lease it reads (BatchWork and DeviceBatch declare it
// last), so no pool slot is rewritten while its copy is in flight.
//
// The stage outlives the loader while batches are held: every DeviceCopy
// holds it (its engine, its free device buffers, its counters).
// Thread-safety: OnReady on decoder threads, Deliver on the consumer's,
// DeviceCopy destruction on any; the free list and counters are guarded.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer_pool.h"
#include "device/copy_engine.h"
#include "pipeline/gpu_decode.h"
#include "stoker/loader.h"
#include "stoker/stats.h"

namespace stoker {

class DeviceStage;

// One batch buffer's copy to a device buffer, and that buffer's ownership.
class DeviceCopy {
 public:
  DeviceCopy(std::shared_ptr<DeviceStage> stage, void* device, size_t bytes, std::unique_ptr<PendingCopy> pending,
             int gpu_images)
      : stage_(std::move(stage)), device_(device), bytes_(bytes), pending_(std::move(pending)),
        gpu_images_(gpu_images) {}
  // Waits for the copy, counts its times, returns the device buffer (behind
  // a fence on the consumer's stream, if it used the batch).
  ~DeviceCopy();
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  uint8_t* device_data() const { return static_cast<uint8_t*>(device_); }
  Status NeededOn(uintptr_t stream);

 private:
  std::shared_ptr<DeviceStage> stage_;
  void* device_;
  size_t bytes_;
  std::unique_ptr<PendingCopy> pending_;
  int gpu_images_;  // decoded on the device after the copy
  bool needed_ = false;
  uintptr_t stream_ = 0;
};

class DeviceStage : public std::enable_shared_from_this<DeviceStage> {
 public:
  // Null (no stage) for device "cpu" without pin_memory, or pin_memory where
  // there is no CUDA (as torch's pin_memory: no effect). device "cuda" with
  // no CUDA runtime or device: FailedPrecondition naming what was looked for.
  static Result<std::shared_ptr<DeviceStage>> Create(const LoaderOptions& options);
  ~DeviceStage();

  // For the batch pool: page-locks its buffers through the engine; null when
  // the engine has no host memory to pin (the CPU engine pins nothing).
  std::shared_ptr<BufferPool::PageLocker> page_locker();
  bool copies() const { return copies_; }

  // A decoder thread finished a batch with no failed slot (one with failures
  // is refilled at delivery, then copied): its copy issued now, or null when
  // this stage copies nothing or the issue failed (Deliver tries again and
  // reports the error).
  std::shared_ptr<DeviceCopy> OnReady(const BufferPool::Lease& lease, GpuJobs* jobs);
  // The consumer takes `host` (work's batch, made after skip refills); its copy,
  // issued now if OnReady did not, becomes a Batch viewing device memory.
  Result<std::shared_ptr<Batch>> Deliver(std::shared_ptr<Batch> host, std::shared_ptr<DeviceCopy> copy,
                                         const BufferPool::Lease& lease, GpuJobs* jobs);
  // Image fields decoded on the device: every copy runs its batch's GPU work after it.
  void SetGpu(std::shared_ptr<GpuDecode> gpu) { gpu_ = std::move(gpu); }
  // Adds the h2d counters to a snapshot.
  void Fill(RecorderSnapshot* s);
  CopyEngine& engine() { return *engine_; }
  // Device buffers kept for reuse: the most batches the tuner may hold at
  // once (its largest prefetch + 1), so a raised prefetch does not free and
  // allocate a device buffer for every batch.
  void KeepBuffers(size_t n);

 private:
  friend class DeviceCopy;
  DeviceStage(std::shared_ptr<CopyEngine> engine, bool copies, size_t capacity)
      : engine_(std::move(engine)), copies_(copies), capacity_(capacity) {}
  Result<std::shared_ptr<DeviceCopy>> Issue(const BufferPool::Lease& lease, GpuJobs* jobs);
  void Return(void* device, size_t bytes, std::shared_ptr<ReleaseFence> fence);
  void Count(const std::optional<CopyTimes>& times, size_t bytes, int gpu_images);
  // A completed copy whose times are not readable yet (on CUDA the consumer's
  // mark may still be queued behind its step): kept, and counted by a later
  // Fill or Defer once they are. At most kMaxDeferred; the oldest beyond
  // that are counted untimed.
  void Defer(std::unique_ptr<PendingCopy> copy, size_t bytes, int gpu_images);
  void ResolveDeferred();  // REQUIRES mu_
  static constexpr size_t kMaxDeferred = 64;

  // Set once, before the first batch. Declared before the engine, so it
  // outlives copies the engine still completes when it is destroyed.
  std::shared_ptr<GpuDecode> gpu_;
  const std::shared_ptr<CopyEngine> engine_;
  const bool copies_;      // false: the stage only pins
  size_t capacity_;  // guarded by mu_; device buffers kept for reuse (KeepBuffers); more are freed on return

  struct Free {
    void* device;
    size_t bytes;
    std::shared_ptr<ReleaseFence> fence;  // the last reader's release; the next copy waits on it
  };
  mutable std::mutex mu_;
  std::vector<Free> free_;  // guarded by mu_
  struct Deferred {
    std::unique_ptr<PendingCopy> copy;
    size_t bytes;
    int gpu_images;
  };
  std::vector<Deferred> deferred_;  // guarded by mu_; oldest first
  int64_t live_ = 0;        // guarded by mu_: device buffers in existence
  int64_t peak_ = 0;        // guarded by mu_
  // Shared with the pool's page locker, which may outlive the stage (a host batch held past the loader).
  const std::shared_ptr<std::atomic<int64_t>> pinned_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<uint64_t> copies_done_{0}, bytes_{0}, untimed_{0};
  // Copies issued as their batch became ready (OnReady), and at delivery.
  std::atomic<uint64_t> issued_early_{0}, issued_at_delivery_{0};
  std::atomic<uint64_t> copy_ns_{0}, exposed_ns_{0};
};

}  // namespace stoker
