// pipeline/device_stage.cc — see device_stage.h.
#include "pipeline/device_stage.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "device/cuda_ordinal.h"

namespace stoker {

namespace {

// A Batch whose arrays view the device buffer its copy fills; the host batch
// (and its pool lease) is held until the copy is destroyed, which waits for it.
class DeviceBatch : public Batch {
 public:
  DeviceBatch(std::shared_ptr<Batch> host, std::shared_ptr<DeviceCopy> copy, const uint8_t* host_base, int device)
      : host_(std::move(host)), copy_(std::move(copy)) {
    for (ArrayView v : host_->arrays()) {
      v.data = copy_->device_data() + (v.data - host_base);
      v.device = device;
      arrays_.push_back(std::move(v));
    }
  }
  int64_t index() const override { return host_->index(); }
  int size() const override { return host_->size(); }
  const std::vector<ArrayView>& arrays() const override { return arrays_; }
  const std::vector<std::string>& keys() const override { return host_->keys(); }
  const std::vector<std::string>& urls() const override { return host_->urls(); }
  const std::vector<SlotFailure>& failures() const override { return host_->failures(); }
  Status NeededOn(uintptr_t stream) override { return copy_->NeededOn(stream); }

 private:
  std::shared_ptr<Batch> host_;
  std::shared_ptr<DeviceCopy> copy_;  // after host_: destroyed (waiting for the copy) before the lease goes back
  std::vector<ArrayView> arrays_;
};

class EnginePageLocker : public BufferPool::PageLocker {
 public:
  EnginePageLocker(std::shared_ptr<CopyEngine> engine, std::shared_ptr<std::atomic<int64_t>> pinned)
      : engine_(std::move(engine)), pinned_(pinned) {}
  bool Lock(void* p, size_t bytes) override {
    const bool ok = engine_->PinHost(p, bytes);
    if (ok) pinned_->fetch_add(1);
    return ok;
  }
  void Unlock(void* p) override {
    engine_->UnpinHost(p);
    pinned_->fetch_sub(1);
  }

 private:
  std::shared_ptr<CopyEngine> engine_;
  std::shared_ptr<std::atomic<int64_t>> pinned_;  // the stage's count
};

}  // namespace

DeviceCopy::~DeviceCopy() {
  std::shared_ptr<ReleaseFence> fence = needed_ ? stage_->engine_->Released(stream_) : nullptr;
  (void)pending_->Wait();
  if (std::optional<CopyTimes> times = pending_->Times()) {
    stage_->Count(times, bytes_, gpu_images_);
  } else {
    stage_->Defer(std::move(pending_), bytes_, gpu_images_);
  }
  pending_.reset();
  stage_->Return(device_, bytes_, std::move(fence));
}

Status DeviceCopy::NeededOn(uintptr_t stream) {
  needed_ = true;
  stream_ = stream;
  return pending_->NeededOn(stream);
}

Result<std::shared_ptr<DeviceStage>> DeviceStage::Create(const LoaderOptions& o) {
  const size_t capacity = static_cast<size_t>(o.prefetch_batches) + 1;
  if (o.device == "cpu-late") {
    if (o.late_copy_ms < 0) return InvalidArgument("late_copy_ms must be >= 0");
    LateCopyOptions late;
    late.delay_ms = o.late_copy_ms;
    return std::shared_ptr<DeviceStage>(new DeviceStage(MakeLateCopyEngine(late), true, capacity));
  }
  if (o.device == "cpu") {
    if (!o.pin_memory) return std::shared_ptr<DeviceStage>();
    Result<std::shared_ptr<CopyEngine>> engine = MakeCudaCopyEngine(0);
    if (!engine.ok()) return std::shared_ptr<DeviceStage>();  // pin_memory without CUDA: no effect, as in torch
    return std::shared_ptr<DeviceStage>(new DeviceStage(std::move(engine).value(), false, capacity));
  }
  const int ordinal = CudaOrdinal(o.device);
  if (ordinal < 0) {
    return InvalidArgument("device=\"" + o.device + "\": expected \"cpu\", \"cuda\" or \"cuda:N\"");
  }
  Result<std::shared_ptr<CopyEngine>> engine = MakeCudaCopyEngine(ordinal);
  if (!engine.ok()) {
    return Status(engine.status().code(), "device=\"" + o.device + "\" needs CUDA: " + engine.status().message());
  }
  return std::shared_ptr<DeviceStage>(new DeviceStage(std::move(engine).value(), true, capacity));
}

DeviceStage::~DeviceStage() {
  for (Free& f : free_) engine_->FreeDevice(f.device, f.bytes);
}

std::shared_ptr<BufferPool::PageLocker> DeviceStage::page_locker() {
  if (engine_->device() < 0) return nullptr;
  return std::make_shared<EnginePageLocker>(engine_, pinned_);
}

Result<std::shared_ptr<DeviceCopy>> DeviceStage::Issue(const BufferPool::Lease& lease, GpuJobs* jobs) {
  Free buf{nullptr, lease.size(), nullptr};
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].bytes == lease.size()) {
        buf = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    if (buf.device == nullptr) {
      ++live_;
      peak_ = std::max(peak_, live_);
    }
  }
  if (buf.device == nullptr) {
    Result<void*> made = engine_->AllocateDevice(lease.size());
    if (!made.ok()) {
      std::lock_guard lock(mu_);
      --live_;
      return made.status();
    }
    buf.device = *made;
  }
  StreamWork then;
  int gpu_images = 0;
  if (gpu_ && jobs) {
    {
      std::lock_guard lock(jobs->mu);
      gpu_images = static_cast<int>(jobs->jobs.size());
    }
    then = gpu_->Work(*jobs, static_cast<uint8_t*>(buf.device));
  }
  Result<std::unique_ptr<PendingCopy>> pending =
      engine_->Issue(lease.data(), buf.device, lease.size(), buf.fence, std::move(then));
  if (!pending.ok()) {
    Return(buf.device, buf.bytes, std::move(buf.fence));
    return pending.status();
  }
  return std::make_shared<DeviceCopy>(shared_from_this(), buf.device, buf.bytes, std::move(pending).value(),
                                      gpu_images);
}

std::shared_ptr<DeviceCopy> DeviceStage::OnReady(const BufferPool::Lease& lease, GpuJobs* jobs) {
  if (!copies_) return nullptr;
  Result<std::shared_ptr<DeviceCopy>> copy = Issue(lease, jobs);
  if (!copy.ok()) return nullptr;
  issued_early_.fetch_add(1, std::memory_order_relaxed);
  return std::move(copy).value();
}

Result<std::shared_ptr<Batch>> DeviceStage::Deliver(std::shared_ptr<Batch> host, std::shared_ptr<DeviceCopy> copy,
                                                    const BufferPool::Lease& lease, GpuJobs* jobs) {
  if (!copy) {
    STOKER_ASSIGN_OR_RETURN(copy, Issue(lease, jobs));
    issued_at_delivery_.fetch_add(1, std::memory_order_relaxed);
  }
  return std::shared_ptr<Batch>(std::make_shared<DeviceBatch>(std::move(host), std::move(copy), lease.data(),
                                                              engine_->device()));
}

void DeviceStage::KeepBuffers(size_t n) {
  std::lock_guard lock(mu_);
  capacity_ = std::max(capacity_, n);
}

void DeviceStage::Return(void* device, size_t bytes, std::shared_ptr<ReleaseFence> fence) {
  std::lock_guard lock(mu_);
  if (static_cast<size_t>(live_) > capacity_) {  // an overflow batch's buffer: not kept
    --live_;
    engine_->FreeDevice(device, bytes);
    return;
  }
  free_.push_back({device, bytes, std::move(fence)});
}

void DeviceStage::Count(const std::optional<CopyTimes>& times, size_t bytes, int gpu_images) {
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  copies_done_.fetch_add(1, std::memory_order_relaxed);
  if (!times) {
    untimed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  copy_ns_.fetch_add(static_cast<uint64_t>(times->copy_s * 1e9), std::memory_order_relaxed);
  exposed_ns_.fetch_add(static_cast<uint64_t>(times->exposed_s * 1e9), std::memory_order_relaxed);
  if (gpu_ && gpu_images > 0) gpu_->DeviceTime(gpu_images, times->copy_s);
}

void DeviceStage::Defer(std::unique_ptr<PendingCopy> copy, size_t bytes, int gpu_images) {
  std::lock_guard lock(mu_);
  deferred_.push_back({std::move(copy), bytes, gpu_images});
  ResolveDeferred();
}

void DeviceStage::ResolveDeferred() {
  size_t kept = 0;
  for (size_t i = 0; i < deferred_.size(); ++i) {
    Deferred& d = deferred_[i];
    std::optional<CopyTimes> times = d.copy->Times();
    if (times || deferred_.size() - i > kMaxDeferred) {
      Count(times, d.bytes, d.gpu_images);
    } else {
      deferred_[kept++] = std::move(deferred_[i]);
    }
  }
  deferred_.resize(kept);
}

void DeviceStage::Fill(RecorderSnapshot* s) {
  {
    std::lock_guard lock(mu_);
    ResolveDeferred();
  }
  s->h2d_copies = copies_done_.load(std::memory_order_relaxed);
  s->h2d_bytes = bytes_.load(std::memory_order_relaxed);
  s->h2d_untimed = untimed_.load(std::memory_order_relaxed);
  s->h2d_s = static_cast<double>(copy_ns_.load(std::memory_order_relaxed)) * 1e-9;
  s->h2d_exposed_s = static_cast<double>(exposed_ns_.load(std::memory_order_relaxed)) * 1e-9;
  s->pinned_buffers = pinned_->load(std::memory_order_relaxed);
  s->h2d_overwrites = engine_->overwrites();
  s->h2d_early = issued_early_.load(std::memory_order_relaxed);
  s->h2d_at_delivery = issued_at_delivery_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  s->device_buffers = live_;
  s->device_buffers_peak = peak_;
}

}  // namespace stoker
