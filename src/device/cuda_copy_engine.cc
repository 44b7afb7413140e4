// device/cuda_copy_engine.cc — the CUDA copy engine of copy_engine.h.
//
// One non-blocking stream per engine (so copies never serialize behind the
// legacy default stream's work) on the loader's device. A copy is
//   [wait on the buffer's release fence] → event start → cudaMemcpyAsync → event end
// on that stream; the consumer's stream waits on `end` (cudaStreamWaitEvent:
// no host sync) after recording `needed`, so exposed time is
// max(0, end - needed) on the GPU's own clock and the copy's time end - start.
// Batch buffers are page-locked with cudaHostRegister (the pool's memory is
// allocated as before, then registered), so cudaMemcpyAsync is a true DMA
// that overlaps compute instead of a staged, synchronous copy.
// The CPU engine (late_copy_engine.cc) exercises the loader's side of the
// same contract in CI.
// Thread-safety: the runtime's calls are thread-safe; each copy's events are
// its own.
#include "device/copy_engine.h"
#include "device/cuda_runtime.h"

namespace stoker {

namespace {

// Makes `device` current on this thread for a scope, then restores the
// caller's (Issue also runs on the consumer's thread, whose current device
// belongs to torch).
class DeviceScope {
 public:
  DeviceScope(const cuda::Runtime* rt, int device) : rt_(rt) {
    if (rt_->GetDevice(&previous_) != cuda::kSuccess) previous_ = -1;
    status_ = previous_ == device ? Status::Ok() : rt_->Check(rt_->SetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() {
    if (previous_ >= 0) rt_->SetDevice(previous_);
  }
  const Status& status() const { return status_; }

 private:
  const cuda::Runtime* rt_;
  int previous_ = -1;
  Status status_;
};

class CudaFence : public ReleaseFence {
 public:
  CudaFence(const cuda::Runtime* rt, cuda::Event e) : rt_(rt), event_(e) {}
  ~CudaFence() override { rt_->EventDestroy(event_); }
  cuda::Event event() const { return event_; }

 private:
  const cuda::Runtime* rt_;
  cuda::Event event_;
};

class CudaCopy : public PendingCopy {
 public:
  CudaCopy(const cuda::Runtime* rt, int device, cuda::Event start, cuda::Event end, std::shared_ptr<ReleaseFence> after)
      : rt_(rt), device_(device), start_(start), end_(end), after_(std::move(after)) {}
  ~CudaCopy() override {
    (void)Wait();
    rt_->EventDestroy(start_);
    rt_->EventDestroy(end_);
    if (needed_) rt_->EventDestroy(needed_);
  }
  bool Done() override { return rt_->EventQuery(end_) != cuda::kErrorNotReady; }
  Status Wait() override { return rt_->Check(rt_->EventSynchronize(end_), "cudaEventSynchronize (batch copy)"); }
  Status NeededOn(uintptr_t stream) override {
    auto s = reinterpret_cast<cuda::Stream>(stream);
    if (needed_ == nullptr) {
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventCreateWithFlags(&needed_, cuda::kEventDefault), "cudaEventCreate"));
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventRecord(needed_, s), "cudaEventRecord (batch needed)"));
    }
    return rt_->Check(rt_->StreamWaitEvent(s, end_, 0), "cudaStreamWaitEvent (consumer waits for its batch)");
  }
  std::optional<CopyTimes> Times() override {
    float copy_ms = 0;
    if (rt_->EventElapsedTime(&copy_ms, start_, end_) != cuda::kSuccess) return std::nullopt;
    CopyTimes t;
    t.copy_s = copy_ms * 1e-3;
    if (needed_) {
      float exposed_ms = 0;  // negative: the copy ended before the consumer needed it
      if (rt_->EventElapsedTime(&exposed_ms, needed_, end_) != cuda::kSuccess) return std::nullopt;
      t.exposed_s = exposed_ms > 0 ? exposed_ms * 1e-3 : 0;
    }
    return t;
  }

 private:
  const cuda::Runtime* rt_;
  int device_;
  cuda::Event start_, end_;
  cuda::Event needed_ = nullptr;
  std::shared_ptr<ReleaseFence> after_;  // kept until the copy that waits on it is gone
};

class CudaCopyEngine : public CopyEngine {
 public:
  CudaCopyEngine(const cuda::Runtime* rt, int device, cuda::Stream stream) : rt_(rt), device_(device), stream_(stream) {}
  ~CudaCopyEngine() override { rt_->StreamDestroy(stream_); }
  std::string name() const override { return "cuda"; }
  int device() const override { return device_; }

  Result<void*> AllocateDevice(size_t bytes) override {
    DeviceScope scope(rt_, device_);
    STOKER_RETURN_IF_ERROR(scope.status());
    void* p = nullptr;
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->Malloc(&p, bytes == 0 ? 1 : bytes),
                                      ("cudaMalloc of a " + std::to_string(bytes) + "-byte batch buffer").c_str()));
    return p;
  }
  void FreeDevice(void* p, size_t) override { rt_->Free(p); }
  bool PinHost(void* p, size_t bytes) override {
    return rt_->HostRegister(p, bytes, cuda::kHostRegisterDefault) == cuda::kSuccess;
  }
  void UnpinHost(void* p) override { rt_->HostUnregister(p); }

  Result<std::unique_ptr<PendingCopy>> Issue(const void* host, void* device, size_t bytes,
                                             const std::shared_ptr<ReleaseFence>& after, StreamWork then) override {
    DeviceScope scope(rt_, device_);  // the current device is per thread
    STOKER_RETURN_IF_ERROR(scope.status());
    cuda::Event start = nullptr, end = nullptr;
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventCreateWithFlags(&start, cuda::kEventDefault), "cudaEventCreate"));
    if (Status st = rt_->Check(rt_->EventCreateWithFlags(&end, cuda::kEventDefault), "cudaEventCreate"); !st.ok()) {
      rt_->EventDestroy(start);
      return st;
    }
    auto copy = std::make_unique<CudaCopy>(rt_, device_, start, end, after);
    if (auto* fence = dynamic_cast<CudaFence*>(after.get())) {
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamWaitEvent(stream_, fence->event(), 0),
                                        "cudaStreamWaitEvent (copy waits for the buffer's last reader)"));
    }
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventRecord(start, stream_), "cudaEventRecord (copy start)"));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(device, host, bytes, cuda::kMemcpyHostToDevice, stream_),
                                      "cudaMemcpyAsync (batch to device)"));
    if (then) STOKER_RETURN_IF_ERROR(then(reinterpret_cast<uintptr_t>(stream_)));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventRecord(end, stream_), "cudaEventRecord (copy end)"));
    return std::unique_ptr<PendingCopy>(std::move(copy));
  }

  std::shared_ptr<ReleaseFence> Released(uintptr_t stream) override {
    cuda::Event e = nullptr;
    if (rt_->EventCreateWithFlags(&e, cuda::kEventDisableTiming) != cuda::kSuccess) return nullptr;
    if (rt_->EventRecord(e, reinterpret_cast<cuda::Stream>(stream)) != cuda::kSuccess) {
      rt_->EventDestroy(e);
      return nullptr;
    }
    return std::make_shared<CudaFence>(rt_, e);
  }

 private:
  const cuda::Runtime* rt_;
  const int device_;
  cuda::Stream stream_;
};

}  // namespace

Result<std::shared_ptr<CopyEngine>> MakeCudaCopyEngine(int device) {
  STOKER_ASSIGN_OR_RETURN(const cuda::Runtime* rt, cuda::LoadCudaRuntime(/*require_device=*/true));
  int count = 0;
  STOKER_RETURN_IF_ERROR(rt->Check(rt->GetDeviceCount(&count), "cudaGetDeviceCount"));
  if (device < 0 || device >= count) {
    return InvalidArgument("device cuda:" + std::to_string(device) + " does not exist: the CUDA runtime " + rt->path +
                           " sees " + std::to_string(count) + " device(s)");
  }
  DeviceScope scope(rt, device);
  STOKER_RETURN_IF_ERROR(scope.status());
  cuda::Stream stream = nullptr;
  STOKER_RETURN_IF_ERROR(rt->Check(rt->StreamCreateWithFlags(&stream, cuda::kStreamNonBlocking),
                                   "cudaStreamCreateWithFlags (the loader's copy stream)"));
  return std::shared_ptr<CopyEngine>(std::make_shared<CudaCopyEngine>(rt, device, stream));
}

}  // namespace stoker
