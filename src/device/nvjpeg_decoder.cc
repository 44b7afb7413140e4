// device/nvjpeg_decoder.cc — the nvJPEG decoder of gpu_decoder.h.
//
// Where the GPU has a hardware JPEG engine (NVJPEG_BACKEND_HARDWARE), the
// hardware is driven as DALI, nvImageCodec and torchvision drive it: one
// worker per device (a HardwareBatcher, hardware_batcher.h) with one nvJPEG
// state and one non-blocking stream; decode threads queue their images and
// the worker combines them into hardware batches of whole engines x cores
// units (at most kMaxHardwareBatch); each batch is nvjpegDecodeBatchedInitialize'd
// with its size, decoded, and host-synchronized on that stream before its
// images are handed on (on Hopper the hardware path does not wait for work
// queued before it on its stream: torchcodec#1634, vision#9606).
// nvjpegDecodeBatchedPreAllocate sizes the state's device memory for the
// largest batch and image seen (grown when a batch exceeds it), so the
// decode call does not free and allocate device memory. Three states with
// three batched calls in flight at once, as stoker ran before, is what no
// reference does and where the H200's hardware decode stopped returning
// (issue 46). A hardware batch that does not return within its bound turns
// the hardware off for the process (the batcher's watchdog): its images, and
// every later one, decode on the CPU.
// Without the engine: nvJPEG's CUDA decoder (NVJPEG_BACKEND_DEFAULT), one
// state per lane, called by the decode threads themselves.
//
// Each decoded image (interleaved RGB) goes to an arena, then the two resize
// kernels (gpu_kernels.h) write each output slot on the copy stream, after
// the batch's copy (which waits for the consumer's release of the device
// buffer they write) and after the decode's event. The arenas are a ring of
// kArenas per lane: before one is written again, the host waits for the
// kernels that last read it (normally long done), so a decode never
// overwrites pixels a resize still reads. An arena grows to the largest
// batch and stays; one the watchdog abandoned (the hung hardware may still
// write it) is never used again (leaked, once per process at most).
// Lanes: the decode threads' contexts (arenas, a stream for CPU-decoded
// images and tables, a parsed stream for nvjpegDecodeBatchedSupported, the
// CUDA backend's state), kLanes of them so that that many threads resize
// and fall back at once; the hardware itself is the worker's alone.
// What the engine says it cannot take (nvjpegDecodeBatchedSupported) and a
// batch nvJPEG fails are decoded on the calling thread by libjpeg-turbo and
// copied into the arena, then resized by the same kernels; counted as CPU fallbacks.
// One decoder per device for the process (MakeNvjpegDecoder keeps it): its
// nvJPEG handle, states and worker live as long as the process, so loaders
// made and dropped one after another do not create and destroy
// hardware-engine handles each time; a loader that goes returns its arena
// memory (Trim).
// Thread-safety: Decode and Trim from any thread; a lane is used by one at a time (lanes_mu_).
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "codecs/image_decoder.h"
#include "device/cuda_runtime.h"
#include "device/gpu_decoder.h"
#include "device/gpu_kernels.h"
#include "device/gpu_resize.h"
#include "device/hardware_batcher.h"
#include "device/nvjpeg_api.h"

namespace stoker {

namespace {

constexpr size_t kAlign = 256;
constexpr int kArenas = 3;
constexpr int kLanes = 3;
constexpr int kMaxHardwareBatch = 64;  // images in one hardware batch, at most (rounded down to whole units)

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Arena {
  void* ptr = nullptr;
  size_t bytes = 0;
  cuda::Event decoded = nullptr;  // on the lane's decode stream: its pixels are in
  cuda::Event read = nullptr;     // on the copy stream: the resize that read it
  bool used = false;
};

// A decode thread's context: everything a batch's decode touches but the hardware.
struct Lane {
  nvjpeg::State state = nullptr;        // the CUDA backend's (no hardware engine)
  nvjpeg::JpegStream parsed = nullptr;  // for nvjpegDecodeBatchedSupported
  cuda::Stream stream = nullptr;        // the decode stream
  Arena arenas[kArenas];
  uint64_t next_arena = 0;
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpeg::Image> images;
  std::vector<KernelJob> kernel_jobs;
  std::vector<uint8_t> rgb;
  ImageDecoder cpu_decoder;
};

class NvjpegDecoder : public GpuDecoder {
 public:
  NvjpegDecoder(const cuda::Runtime* rt, const nvjpeg::Api* nj, const cudrv::Driver* drv, int device)
      : rt_(rt), nj_(nj), drv_(drv), device_(device) {}
  ~NvjpegDecoder() override {
    batcher_.reset();  // its worker is idle: only Init's failure destroys a decoder
    if (hw_stream_) {
      rt_->StreamSynchronize(hw_stream_);
      rt_->StreamDestroy(hw_stream_);
    }
    if (hw_state_) nj_->JpegStateDestroy(hw_state_);
    for (auto& lane : lanes_) {
      for (Arena& a : lane->arenas) {
        if (a.read) rt_->EventSynchronize(a.read);
        if (a.ptr) rt_->Free(a.ptr);
        if (a.read) rt_->EventDestroy(a.read);
        if (a.decoded) rt_->EventDestroy(a.decoded);
      }
      if (lane->stream) {
        rt_->StreamSynchronize(lane->stream);
        rt_->StreamDestroy(lane->stream);
      }
      if (lane->parsed) nj_->JpegStreamDestroy(lane->parsed);
      if (lane->state) nj_->JpegStateDestroy(lane->state);
    }
    if (handle_) nj_->Destroy(handle_);
  }

  Status Init() {
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->SetDevice(device_), "cudaSetDevice"));
    // The hardware engine where there is one: creating its handle, or a
    // batched state on it, fails elsewhere.
    hardware_ = nj_->CreateEx(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &handle_) == 0;
    if (hardware_) {
      unsigned engines = 0, cores = 0;
      if (nj_->GetHardwareDecoderInfo(handle_, &engines, &cores) == 0) {
        engines_ = static_cast<int>(engines);
        cores_ = static_cast<int>(cores);
      }
      nvjpeg::State probe = nullptr;
      const bool ok = nj_->JpegStateCreate(handle_, &probe) == 0 &&
                      nj_->DecodeBatchedInitialize(handle_, probe, 1, 1, nvjpeg::kOutputRgbi) == 0;
      if (probe) nj_->JpegStateDestroy(probe);
      if (!ok) {
        nj_->Destroy(handle_);
        handle_ = nullptr;
        hardware_ = false;
      }
    }
    if (!hardware_) {
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->CreateEx(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &handle_),
                                        "nvjpegCreateEx (CUDA backend)"));
    }
    if (hardware_) {
      // The one hardware state, its stream and its worker.
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->JpegStateCreate(handle_, &hw_state_), "nvjpegJpegStateCreate (hardware)"));
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamCreateWithFlags(&hw_stream_, cuda::kStreamNonBlocking),
                                        "cudaStreamCreateWithFlags (the hardware decode stream)"));
      HardwareBatcherOptions b;
      b.name = "nvJPEG hardware decoder on cuda:" + std::to_string(device_);
      b.unit = std::max(1, engines_ * std::max(1, cores_));
      b.max_batch = kMaxHardwareBatch;
      // $STOKER_GPU_WATCHDOG_S: the least bound (2 s; the first batch's 10 s, or this where larger).
      if (const char* env = getenv("STOKER_GPU_WATCHDOG_S"); env && *env) b.min_bound_s = std::max(0.01, atof(env));
      batcher_ = std::make_unique<HardwareBatcher>(
          [this](std::span<const HardwareImage> batch) { return RunHardware(batch); }, b);
    }
    for (int i = 0; i < kLanes; ++i) {
      auto lane = std::make_unique<Lane>();
      if (!hardware_) {
        STOKER_RETURN_IF_ERROR(nj_->Check(nj_->JpegStateCreate(handle_, &lane->state), "nvjpegJpegStateCreate"));
      }
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->JpegStreamCreate(handle_, &lane->parsed), "nvjpegJpegStreamCreate"));
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamCreateWithFlags(&lane->stream, cuda::kStreamNonBlocking),
                                        "cudaStreamCreateWithFlags (a decode stream)"));
      for (Arena& a : lane->arenas) {
        STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventCreateWithFlags(&a.read, cuda::kEventDisableTiming),
                                          "cudaEventCreate"));
        STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventCreateWithFlags(&a.decoded, cuda::kEventDisableTiming),
                                          "cudaEventCreate"));
      }
      free_.push_back(lane.get());
      lanes_.push_back(std::move(lane));
    }
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleLoadData(&module_, kGpuKernelsFatbin),
                                       "cuModuleLoadData (stoker's kernels)"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleGetFunction(&horizontal_, module_, kHorizontalKernel),
                                       "cuModuleGetFunction"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleGetFunction(&output_, module_, kOutputKernel), "cuModuleGetFunction"));
    return Status::Ok();
  }

  // Names the library too: settings()["gpu_decode"]["decoder"] says which libnvjpeg runs.
  std::string name() const override {
    const std::string lib = ", libnvjpeg " + nj_->version + " (" + nj_->path + ")";
    if (!hardware_) return "nvjpeg cuda" + lib;
    return "nvjpeg hardware (" + std::to_string(engines_) + " engines x " + std::to_string(std::max(1, cores_)) +
           " cores, one worker)" + lib;
  }
  bool dead() const override { return batcher_ && batcher_->dead(); }
  std::string failure() const override { return batcher_ ? batcher_->failure() : ""; }

  // Frees the arenas of the lanes no decode is using, once their last resize is done.
  void Trim() override {
    std::lock_guard lock(lanes_mu_);
    for (Lane* lane : free_) {
      for (Arena& a : lane->arenas) {
        if (a.used) rt_->EventSynchronize(a.read);
        if (a.ptr) rt_->Free(a.ptr);
        a.ptr = nullptr;
        a.bytes = 0;
        a.used = false;
      }
    }
  }
  const char* Refuses(const JpegHeader& h) const override { return h.GpuRefusal(); }

  Status Decode(std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs, uint8_t* device_base,
                uintptr_t copy_stream_id, GpuDecodeCounts* counts) override {
    Lane* lane = Take();
    Status st = DecodeOn(*lane, jobs, specs, device_base, reinterpret_cast<void*>(copy_stream_id), counts);
    Give(lane);
    return st;
  }

 private:
  Lane* Take() {
    std::unique_lock lock(lanes_mu_);
    lane_free_.wait(lock, [&] { return !free_.empty(); });
    Lane* lane = free_.back();
    free_.pop_back();
    return lane;
  }
  void Give(Lane* lane) {
    std::lock_guard lock(lanes_mu_);
    free_.push_back(lane);
    lane_free_.notify_one();
  }

  Status DecodeOn(Lane& lane, std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs,
                  uint8_t* device_base, void* copy_stream, GpuDecodeCounts* counts) {
    void* stream = lane.stream;
    Arena& arena_slot = lane.arenas[lane.next_arena++ % kArenas];
    if (arena_slot.used) {  // the resize that last read it is done (it ran batches ago)
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventSynchronize(arena_slot.read), "cudaEventSynchronize (arena reuse)"));
    }
    const size_t n = jobs.size();
    // Arena: decoded images, scratch rows, the kernels' job and spec tables.
    std::vector<size_t> rgb_at(n), tmp_at(n);
    std::vector<taps::Window> spans(n);
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      rgb_at[i] = bytes;
      bytes += AlignUp(static_cast<size_t>(jobs[i].width) * jobs[i].height * 3);
    }
    for (size_t i = 0; i < n; ++i) {
      spans[i] = gpu_resize::RowSpan(jobs[i], specs[jobs[i].spec]);
      tmp_at[i] = bytes;
      bytes += AlignUp(static_cast<size_t>(spans[i].count) * jobs[i].win_w * 3);
    }
    const size_t jobs_at = bytes;
    bytes += AlignUp(n * sizeof(KernelJob));
    const size_t specs_at = bytes;
    bytes += AlignUp(specs.size() * sizeof(GpuOutputSpec));
    STOKER_RETURN_IF_ERROR(Reserve(arena_slot, bytes));
    uint8_t* arena = static_cast<uint8_t*>(arena_slot.ptr);

    // Which jobs the decoder takes; the rest decode on this thread (all of
    // them once the watchdog turned the hardware off).
    std::vector<size_t> gpu, cpu;
    const bool off = dead();
    for (size_t i = 0; i < n && off; ++i) cpu.push_back(i);
    for (size_t i = 0; i < n && !off; ++i) {
      int supported = 1;
      const bool parsed = nj_->JpegStreamParseHeader(handle_, jobs[i].bytes, jobs[i].length,
                                                     lane.parsed) == 0;
      if (parsed &&
          (!hardware_ || (nj_->DecodeBatchedSupported(handle_, lane.parsed, &supported) == 0 && supported == 0))) {
        gpu.push_back(i);
      } else {
        cpu.push_back(i);
      }
    }
    if (!gpu.empty() && hardware_) {
      std::vector<HardwareImage> images(gpu.size());
      for (size_t k = 0; k < gpu.size(); ++k) {
        const ImageJob& j = jobs[gpu[k]];
        images[k] = {j.bytes, j.length, arena + rgb_at[gpu[k]], static_cast<size_t>(j.width) * 3, j.width, j.height};
      }
      Status error;
      const HardwareBatcher::Outcome outcome = batcher_->Decode(images, &error);
      if (outcome == HardwareBatcher::Outcome::kAbandoned) {
        // The hung batch may still write this arena: it is that batch's for good; a new one for the CPU's pixels.
        arena_slot.ptr = nullptr;
        arena_slot.bytes = 0;
        arena_slot.used = false;
        STOKER_RETURN_IF_ERROR(Reserve(arena_slot, bytes));
        arena = static_cast<uint8_t*>(arena_slot.ptr);
      }
      if (outcome != HardwareBatcher::Outcome::kDecoded) {
        cpu.insert(cpu.end(), gpu.begin(), gpu.end());
        gpu.clear();
      }
    } else if (!gpu.empty() && !DecodeBatched(lane, jobs, gpu, arena, rgb_at).ok()) {
      cpu.insert(cpu.end(), gpu.begin(), gpu.end());
      gpu.clear();  // the next batch initializes the state again, as nvJPEG asks after a failed one
    }
    for (size_t i : cpu) {
      int w = 0, h = 0;
      STOKER_RETURN_IF_ERROR(lane.cpu_decoder.DecodeRgb({jobs[i].bytes, jobs[i].length}, &lane.rgb,
                                                        &w, &h).WithContext("slot " + std::to_string(jobs[i].slot)));
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + rgb_at[i], lane.rgb.data(), lane.rgb.size(),
                                                         cuda::kMemcpyHostToDevice, stream),
                                        "cudaMemcpyAsync (a CPU-decoded image)"));
      // lane.rgb is reused by the next image: the pageable copy must be done with it.
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamSynchronize(stream), "cudaStreamSynchronize"));
    }

    lane.kernel_jobs.assign(n, KernelJob{});
    unsigned max_w = 1, max_rows = 1, max_ow = 1, max_oh = 1;
    for (size_t i = 0; i < n; ++i) {
      KernelJob& k = lane.kernel_jobs[i];
      k.job = jobs[i];
      k.rgb = arena + rgb_at[i];
      k.pitch = static_cast<long long>(jobs[i].width) * 3;
      k.tmp = arena + tmp_at[i];
      k.tmp_pitch = static_cast<long long>(jobs[i].win_w) * 3;
      k.out = device_base + jobs[i].out_offset;
      k.span_first = spans[i].first;
      k.span_count = spans[i].count;
      max_w = std::max(max_w, static_cast<unsigned>(jobs[i].win_w));
      max_rows = std::max(max_rows, static_cast<unsigned>(spans[i].count));
      max_ow = std::max(max_ow, static_cast<unsigned>(specs[jobs[i].spec].width));
      max_oh = std::max(max_oh, static_cast<unsigned>(specs[jobs[i].spec].height));
    }
    // Pageable sources: cudaMemcpyAsync has staged them when it returns.
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + jobs_at, lane.kernel_jobs.data(),
                                                       n * sizeof(KernelJob), cuda::kMemcpyHostToDevice, stream),
                                      "cudaMemcpyAsync (jobs)"));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + specs_at, specs.data(), specs.size_bytes(),
                                                       cuda::kMemcpyHostToDevice, stream), "cudaMemcpyAsync (specs)"));
    // The kernels write the batch's device buffer: on the copy stream, once decoded.
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventRecord(arena_slot.decoded, stream), "cudaEventRecord (decoded)"));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamWaitEvent(copy_stream, arena_slot.decoded, 0),
                                      "cudaStreamWaitEvent (resize waits for the decode)"));
    void* kjobs = arena + jobs_at;
    void* kspecs = arena + specs_at;
    void* params[] = {&kjobs, &kspecs};
    constexpr unsigned bx = 32, by = 8;
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->LaunchKernel(horizontal_, (max_w + bx - 1) / bx, (max_rows + by - 1) / by,
                                                          static_cast<unsigned>(n), bx, by, 1, 0, copy_stream, params,
                                                          nullptr), "cuLaunchKernel (horizontal resize)"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->LaunchKernel(output_, (max_ow + bx - 1) / bx, (max_oh + by - 1) / by,
                                                          static_cast<unsigned>(n), bx, by, 1, 0, copy_stream, params,
                                                          nullptr), "cuLaunchKernel (output)"));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->EventRecord(arena_slot.read, copy_stream), "cudaEventRecord (arena read)"));
    arena_slot.used = true;
    counts->device += gpu.size();
    counts->cpu_fallbacks += cpu.size();
    return Status::Ok();
  }

  // `a` is not in use (its last reader is done, or it never had one).
  Status Reserve(Arena& a, size_t bytes) {
    if (bytes <= a.bytes) return Status::Ok();
    if (a.ptr) {
      rt_->Free(a.ptr);
      a.ptr = nullptr;
      a.bytes = 0;
    }
    const size_t grown = bytes + bytes / 4;
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->Malloc(&a.ptr, grown),
                                      ("cudaMalloc of a " + std::to_string(grown) + "-byte decode arena").c_str()));
    a.bytes = grown;
    return Status::Ok();
  }

  // The worker's hardware batch (hardware_batcher.h): PreAllocate grown to
  // the workload, Initialize with this batch's size, decode, then a host wait
  // on the hardware stream before the images are handed on.
  Status RunHardware(std::span<const HardwareImage> batch) {
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->SetDevice(device_), "cudaSetDevice (the hardware worker)"));
    const int n = static_cast<int>(batch.size());
    int max_w = 1, max_h = 1;
    for (const HardwareImage& im : batch) {
      max_w = std::max(max_w, im.width);
      max_h = std::max(max_h, im.height);
    }
    if (n > pre_batch_ || max_w > pre_w_ || max_h > pre_h_) {
      // Either orientation of the largest side, for whole units of the engines.
      const int side = std::max({max_w, max_h, pre_w_, pre_h_});
      const int b = std::max(n, pre_batch_);
      const int st = nj_->DecodeBatchedPreAllocate(handle_, hw_state_, b, side, side, nvjpeg::kCss444,
                                                   nvjpeg::kOutputRgbi);
      if (st == 0) {
        pre_batch_ = b;
        pre_w_ = pre_h_ = side;
      } else if (!prealloc_warned_) {
        prealloc_warned_ = true;  // nvJPEG then allocates inside the decode call, as before
        fprintf(stderr, "stoker: %s\n",
                nj_->Check(st, ("nvjpegDecodeBatchedPreAllocate for " + std::to_string(b) + " images of " +
                                std::to_string(side) + "x" + std::to_string(side)).c_str()).message().c_str());
      }
    }
    STOKER_RETURN_IF_ERROR(nj_->Check(nj_->DecodeBatchedInitialize(handle_, hw_state_, n, 1, nvjpeg::kOutputRgbi),
                                      "nvjpegDecodeBatchedInitialize (hardware)"));
    hw_data_.resize(n);
    hw_lengths_.resize(n);
    hw_images_.assign(n, nvjpeg::Image{});
    for (int k = 0; k < n; ++k) {
      hw_data_[k] = batch[k].bytes;
      hw_lengths_[k] = batch[k].length;
      hw_images_[k].channel[0] = batch[k].out;
      hw_images_[k].pitch[0] = batch[k].pitch;
    }
    const Status decoded = nj_->Check(nj_->DecodeBatched(handle_, hw_state_, hw_data_.data(), hw_lengths_.data(),
                                                         hw_images_.data(), hw_stream_),
                                      "nvjpegDecodeBatched (hardware)");
    const Status synced = rt_->Check(rt_->StreamSynchronize(hw_stream_), "cudaStreamSynchronize (hardware batch)");
    return decoded.ok() ? synced : decoded;
  }

  Status DecodeBatched(Lane& lane, std::span<const ImageJob> jobs, const std::vector<size_t>& which,
                       uint8_t* arena, const std::vector<size_t>& rgb_at) {
    const int n = static_cast<int>(which.size());
    // Every batch: the lane's last batch done, then the state initialized,
    // as nvJPEG's documentation asks ("any currently running batched
    // decoding should be finished" before initializing) and as DALI,
    // nvImageCodec and torchvision drive the hardware decoder. A state that
    // took its next batch without either (decode="gpu", fixed batches) or
    // without the wait (auto) is where the H200's decode stopped returning
    // (README, "JPEG decode on the GPU").
    STOKER_RETURN_IF_ERROR(
        rt_->Check(rt_->StreamSynchronize(lane.stream), "cudaStreamSynchronize (the lane's last batch)"));
    STOKER_RETURN_IF_ERROR(nj_->Check(nj_->DecodeBatchedInitialize(handle_, lane.state, n, 1, nvjpeg::kOutputRgbi),
                                      "nvjpegDecodeBatchedInitialize"));
    lane.data.resize(n);
    lane.lengths.resize(n);
    lane.images.assign(n, nvjpeg::Image{});
    for (int k = 0; k < n; ++k) {
      const ImageJob& j = jobs[which[k]];
      lane.data[k] = j.bytes;
      lane.lengths[k] = j.length;
      lane.images[k].channel[0] = arena + rgb_at[which[k]];
      lane.images[k].pitch[0] = static_cast<size_t>(j.width) * 3;
    }
    return nj_->Check(nj_->DecodeBatched(handle_, lane.state, lane.data.data(), lane.lengths.data(),
                                         lane.images.data(), lane.stream),
                      "nvjpegDecodeBatched");
  }

  const cuda::Runtime* rt_;
  const nvjpeg::Api* nj_;
  const cudrv::Driver* drv_;
  const int device_;
  bool hardware_ = false;
  int engines_ = 0, cores_ = 0;
  // The hardware's: one state and stream, used by the batcher's worker only.
  nvjpeg::State hw_state_ = nullptr;
  cuda::Stream hw_stream_ = nullptr;
  int pre_batch_ = 0, pre_w_ = 0, pre_h_ = 0;  // what PreAllocate sized the state for
  bool prealloc_warned_ = false;
  std::vector<const unsigned char*> hw_data_;
  std::vector<size_t> hw_lengths_;
  std::vector<nvjpeg::Image> hw_images_;
  nvjpeg::Handle handle_ = nullptr;  // thread-safe
  cudrv::Module module_ = nullptr;
  cudrv::Function horizontal_ = nullptr, output_ = nullptr;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::mutex lanes_mu_;
  std::condition_variable lane_free_;
  std::vector<Lane*> free_;  // guarded by lanes_mu_
  std::unique_ptr<HardwareBatcher> batcher_;  // set by Init where there is a hardware engine; last: its worker uses the above
};

}  // namespace

Result<std::shared_ptr<GpuDecoder>> MakeNvjpegDecoder(int device) {
  if (kGpuKernelsFatbinSize == 0) {
    return FailedPrecondition("this stoker was built without nvcc, so its GPU decode kernels are not in it: "
                              "rebuild where the CUDA toolkit is on the PATH, or use decode=\"cpu\"");
  }
  STOKER_ASSIGN_OR_RETURN(const cuda::Runtime* rt, cuda::LoadCudaRuntime(/*require_device=*/true));
  STOKER_ASSIGN_OR_RETURN(const nvjpeg::Api* nj, nvjpeg::LoadNvjpeg());
  STOKER_ASSIGN_OR_RETURN(const cudrv::Driver* drv, cudrv::LoadDriver());
  static std::mutex mu;
  static std::map<int, std::shared_ptr<GpuDecoder>> kept;  // guarded by mu
  std::lock_guard lock(mu);
  if (auto it = kept.find(device); it != kept.end()) return it->second;
  // Never destroyed: at process exit the CUDA driver may already be gone.
  auto* decoder = new NvjpegDecoder(rt, nj, drv, device);
  if (Status st = decoder->Init(); !st.ok()) {
    delete decoder;
    return st;
  }
  std::shared_ptr<GpuDecoder> shared(decoder, [](GpuDecoder*) {});
  kept[device] = shared;
  return shared;
}

}  // namespace stoker
