// device/nvjpeg_decoder.cc — the nvJPEG decoder of gpu_decoder.h.
//
// A batch's jobs become one nvjpegDecodeBatched call (the hardware engine's
// batched path where the GPU has one, NVJPEG_BACKEND_HARDWARE; else the
// CUDA decoder, NVJPEG_BACKEND_DEFAULT) writing interleaved RGB into a
// device arena, then the two resize kernels (gpu_kernels.h) write each
// output slot, all on the copy engine's stream after the batch's copy.
// The arena grows to the largest batch and stays (a grow frees the old one
// after a stream sync: rare, at the start).
// What the engine says it cannot take (nvjpegDecodeBatchedSupported) and a
// batch nvJPEG fails are decoded on this thread by libjpeg-turbo and copied
// into the arena, then resized by the same kernels; counted in cpu_fallbacks.
// Thread-safety: Decode serialized by mu_ (one nvJPEG state).
#include <chrono>
#include <mutex>
#include <vector>

#include "codecs/image_decoder.h"
#include "device/cuda_runtime.h"
#include "device/gpu_decoder.h"
#include "device/gpu_kernels.h"
#include "device/gpu_resize.h"
#include "device/nvjpeg_api.h"

namespace stoker {

namespace {

constexpr size_t kAlign = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

class NvjpegDecoder : public GpuDecoder {
 public:
  NvjpegDecoder(const cuda::Runtime* rt, const nvjpeg::Api* nj, const cudrv::Driver* drv, int device)
      : rt_(rt), nj_(nj), drv_(drv), device_(device) {}
  ~NvjpegDecoder() override {
    if (arena_) rt_->Free(arena_);
    if (stream_) nj_->JpegStreamDestroy(stream_);
    if (state_) nj_->JpegStateDestroy(state_);
    if (handle_) nj_->Destroy(handle_);
  }

  Status Init() {
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->SetDevice(device_), "cudaSetDevice"));
    // The hardware engine where there is one: creating its handle fails elsewhere.
    hardware_ = nj_->CreateEx(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &handle_) == 0;
    if (hardware_) {
      unsigned engines = 0, cores = 0;
      if (nj_->GetHardwareDecoderInfo(handle_, &engines, &cores) == 0) engines_ = static_cast<int>(engines);
      if (nj_->JpegStateCreate(handle_, &state_) != 0 ||
          nj_->DecodeBatchedInitialize(handle_, state_, 1, 1, nvjpeg::kOutputRgbi) != 0) {
        if (state_) nj_->JpegStateDestroy(state_);
        nj_->Destroy(handle_);
        state_ = handle_ = nullptr;
        hardware_ = false;
      }
    }
    if (!hardware_) {
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->CreateEx(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &handle_),
                                        "nvjpegCreateEx (CUDA backend)"));
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->JpegStateCreate(handle_, &state_), "nvjpegJpegStateCreate"));
    }
    STOKER_RETURN_IF_ERROR(nj_->Check(nj_->JpegStreamCreate(handle_, &stream_), "nvjpegJpegStreamCreate"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleLoadData(&module_, kGpuKernelsFatbin), "cuModuleLoadData (stoker's kernels)"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleGetFunction(&horizontal_, module_, kHorizontalKernel),
                                       "cuModuleGetFunction"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->ModuleGetFunction(&output_, module_, kOutputKernel), "cuModuleGetFunction"));
    return Status::Ok();
  }

  std::string name() const override {
    return hardware_ ? "nvjpeg hardware (" + std::to_string(engines_) + " engines)" : "nvjpeg cuda";
  }
  const char* Refuses(const JpegHeader& h) const override { return h.GpuRefusal(); }

  Status Decode(std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs, const uint8_t* host_base,
                uint8_t* device_base, uintptr_t stream_id) override {
    std::lock_guard lock(mu_);
    const auto begin = std::chrono::steady_clock::now();
    void* stream = reinterpret_cast<void*>(stream_id);
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
    STOKER_RETURN_IF_ERROR(Reserve(bytes, stream));
    uint8_t* arena = static_cast<uint8_t*>(arena_);

    // Which jobs the decoder takes; the rest decode on this thread.
    std::vector<size_t> gpu, cpu;
    for (size_t i = 0; i < n; ++i) {
      int supported = 1;
      const bool parsed = nj_->JpegStreamParseHeader(handle_, host_base + jobs[i].host_offset, jobs[i].length,
                                                     stream_) == 0;
      if (parsed && (!hardware_ || (nj_->DecodeBatchedSupported(handle_, stream_, &supported) == 0 && supported == 0))) {
        gpu.push_back(i);
      } else {
        cpu.push_back(i);
      }
    }
    if (!gpu.empty() && !DecodeBatched(jobs, gpu, host_base, arena, rgb_at, stream).ok()) {
      cpu.insert(cpu.end(), gpu.begin(), gpu.end());
      gpu.clear();
      initialized_ = -1;  // nvJPEG asks for a re-initialization after a failed batch
    }
    for (size_t i : cpu) {
      int w = 0, h = 0;
      STOKER_RETURN_IF_ERROR(cpu_decoder_.DecodeRgb({host_base + jobs[i].host_offset, jobs[i].length}, &rgb_, &w, &h)
                                 .WithContext("slot " + std::to_string(jobs[i].slot)));
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + rgb_at[i], rgb_.data(), rgb_.size(),
                                                         cuda::kMemcpyHostToDevice, stream),
                                        "cudaMemcpyAsync (a CPU-decoded image)"));
      // rgb_ is reused by the next image: the pageable copy must be done with it.
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamSynchronize(stream), "cudaStreamSynchronize"));
    }

    kernel_jobs_.assign(n, KernelJob{});
    unsigned max_w = 1, max_rows = 1, max_ow = 1, max_oh = 1;
    for (size_t i = 0; i < n; ++i) {
      KernelJob& k = kernel_jobs_[i];
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
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + jobs_at, kernel_jobs_.data(), n * sizeof(KernelJob),
                                                       cuda::kMemcpyHostToDevice, stream), "cudaMemcpyAsync (jobs)"));
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->MemcpyAsync(arena + specs_at, specs.data(), specs.size_bytes(),
                                                       cuda::kMemcpyHostToDevice, stream), "cudaMemcpyAsync (specs)"));
    void* kjobs = arena + jobs_at;
    void* kspecs = arena + specs_at;
    void* params[] = {&kjobs, &kspecs};
    constexpr unsigned bx = 32, by = 8;
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->LaunchKernel(horizontal_, (max_w + bx - 1) / bx, (max_rows + by - 1) / by,
                                                          static_cast<unsigned>(n), bx, by, 1, 0, stream, params,
                                                          nullptr), "cuLaunchKernel (horizontal resize)"));
    STOKER_RETURN_IF_ERROR(drv_->Check(drv_->LaunchKernel(output_, (max_ow + bx - 1) / bx, (max_oh + by - 1) / by,
                                                          static_cast<unsigned>(n), bx, by, 1, 0, stream, params,
                                                          nullptr), "cuLaunchKernel (output)"));
    images += gpu.size();
    cpu_fallbacks += cpu.size();
    batches += 1;
    busy_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - begin).count());
    return Status::Ok();
  }

 private:
  Status Reserve(size_t bytes, void* stream) {
    if (bytes <= arena_bytes_) return Status::Ok();
    if (arena_) {
      STOKER_RETURN_IF_ERROR(rt_->Check(rt_->StreamSynchronize(stream), "cudaStreamSynchronize"));
      rt_->Free(arena_);
      arena_ = nullptr;
      arena_bytes_ = 0;
    }
    const size_t grown = bytes + bytes / 4;
    STOKER_RETURN_IF_ERROR(rt_->Check(rt_->Malloc(&arena_, grown),
                                      ("cudaMalloc of a " + std::to_string(grown) + "-byte decode arena").c_str()));
    arena_bytes_ = grown;
    return Status::Ok();
  }

  Status DecodeBatched(std::span<const ImageJob> jobs, const std::vector<size_t>& which, const uint8_t* host_base,
                       uint8_t* arena, const std::vector<size_t>& rgb_at, void* stream) {
    const int n = static_cast<int>(which.size());
    if (n != initialized_) {
      STOKER_RETURN_IF_ERROR(nj_->Check(nj_->DecodeBatchedInitialize(handle_, state_, n, 1, nvjpeg::kOutputRgbi),
                                        "nvjpegDecodeBatchedInitialize"));
      initialized_ = n;
    }
    data_.resize(n);
    lengths_.resize(n);
    images_.assign(n, nvjpeg::Image{});
    for (int k = 0; k < n; ++k) {
      const ImageJob& j = jobs[which[k]];
      data_[k] = host_base + j.host_offset;
      lengths_[k] = j.length;
      images_[k].channel[0] = arena + rgb_at[which[k]];
      images_[k].pitch[0] = static_cast<size_t>(j.width) * 3;
    }
    return nj_->Check(nj_->DecodeBatched(handle_, state_, data_.data(), lengths_.data(), images_.data(), stream),
                      "nvjpegDecodeBatched");
  }

  const cuda::Runtime* rt_;
  const nvjpeg::Api* nj_;
  const cudrv::Driver* drv_;
  const int device_;
  bool hardware_ = false;
  int engines_ = 0;
  nvjpeg::Handle handle_ = nullptr;
  std::mutex mu_;
  // Guarded by mu_ (after Init).
  nvjpeg::State state_ = nullptr;
  nvjpeg::JpegStream stream_ = nullptr;
  int initialized_ = -1;  // the batch size nvJPEG's state was initialized for
  cudrv::Module module_ = nullptr;
  cudrv::Function horizontal_ = nullptr, output_ = nullptr;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<const unsigned char*> data_;
  std::vector<size_t> lengths_;
  std::vector<nvjpeg::Image> images_;
  std::vector<KernelJob> kernel_jobs_;
  std::vector<uint8_t> rgb_;
  ImageDecoder cpu_decoder_;
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
  auto decoder = std::make_shared<NvjpegDecoder>(rt, nj, drv, device);
  STOKER_RETURN_IF_ERROR(decoder->Init());
  return std::shared_ptr<GpuDecoder>(std::move(decoder));
}

}  // namespace stoker
