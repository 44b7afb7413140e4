// device/standin_gpu_decoder.cc — the stand-in GPU decoder of gpu_decoder.h,
// for CI: with the CPU copy engine (late_copy_engine.cc) "device memory" is
// host memory and Decode runs on that engine's thread after the batch's copy,
// as nvJPEG's work runs on the copy stream. Its "hardware" is a
// HardwareBatcher (hardware_batcher.h) whose worker decodes each batch whole
// with libjpeg-turbo (Pillow's pixels), as nvJPEG's hardware worker does with
// the engines; the caller then writes each output with the kernels' own
// per-pixel functions (gpu_resize.h) in two passes, as the kernels run them.
// An optional delay per image makes it slower than the CPU decoders, to test
// how the split follows measured rates; stall_after_batches makes its
// hardware stop returning, to test the watchdog: every image still decodes
// (on the CPU), and the decoder says it is dead.
// Thread-safety: Decode from any thread (the CPU part serialized by mu_).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "codecs/image_decoder.h"
#include "device/gpu_decoder.h"
#include "device/gpu_resize.h"
#include "device/hardware_batcher.h"

namespace stoker {

namespace {

HardwareBatcherOptions BatcherOptions(const StandInGpuOptions& o) {
  HardwareBatcherOptions b;
  b.name = "stand-in";
  b.unit = o.unit;
  if (o.watchdog_ms > 0) b.min_bound_s = b.first_bound_s = o.watchdog_ms * 1e-3;
  return b;
}

class StandInGpuDecoder : public GpuDecoder {
 public:
  explicit StandInGpuDecoder(StandInGpuOptions options)
      : options_(options),
        batcher_([this](std::span<const HardwareImage> batch) { return RunHardware(batch); },
                 BatcherOptions(options)) {}
  ~StandInGpuDecoder() override {
    std::lock_guard lock(stall_mu_);
    released_ = true;  // a stalled hardware batch returns, so the batcher's worker ends
    stall_cv_.notify_all();
  }
  std::string name() const override { return "stand-in"; }
  const char* Refuses(const JpegHeader& h) const override { return h.GpuRefusal(); }
  bool dead() const override { return batcher_.dead(); }
  std::string failure() const override { return batcher_.failure(); }

  Status Decode(std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs, uint8_t* device_base,
                uintptr_t, GpuDecodeCounts* counts) override {
    // The "device" arena: each image's RGB, kept by the hung batch if the watchdog gives up on it.
    auto arena = std::make_shared<std::vector<std::vector<uint8_t>>>(jobs.size());
    std::vector<HardwareImage> images(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      (*arena)[i].resize(static_cast<size_t>(jobs[i].width) * jobs[i].height * 3);
      images[i] = {jobs[i].bytes, jobs[i].length, (*arena)[i].data(), static_cast<size_t>(jobs[i].width) * 3,
                   jobs[i].width, jobs[i].height};
    }
    Status error;
    const HardwareBatcher::Outcome outcome = batcher_.Decode(images, &error);
    std::lock_guard lock(mu_);
    if (outcome == HardwareBatcher::Outcome::kAbandoned) abandoned_.push_back(arena);
    const bool decoded = outcome == HardwareBatcher::Outcome::kDecoded;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const ImageJob& j = jobs[i];
      const uint8_t* rgb = (*arena)[i].data();
      long pitch = static_cast<long>(j.width) * 3;
      if (!decoded) {  // the CPU decodes what the "hardware" did not
        int w = 0, h = 0;
        STOKER_RETURN_IF_ERROR(decoder_.DecodeRgb({j.bytes, j.length}, &rgb_, &w, &h)
                                   .WithContext("slot " + std::to_string(j.slot)));
        rgb = rgb_.data();
        pitch = static_cast<long>(w) * 3;
      }
      gpu_resize::BothPassesOnHost(rgb, pitch, j, specs[j.spec], &tmp_, device_base + j.out_offset);
    }
    if (decoded) {
      counts->device += jobs.size();
    } else {
      counts->cpu_fallbacks += jobs.size();
    }
    return Status::Ok();
  }

 private:
  // The batcher's worker thread.
  Status RunHardware(std::span<const HardwareImage> batch) {
    {
      std::unique_lock lock(stall_mu_);
      if (options_.stall_after_batches >= 0 && runs_ >= options_.stall_after_batches) {
        stall_cv_.wait(lock, [&] { return released_; });  // stops returning, until the decoder goes
        return Cancelled("stand-in: a stalled hardware batch, released");
      }
      ++runs_;
    }
    for (const HardwareImage& im : batch) {
      int w = 0, h = 0;
      STOKER_RETURN_IF_ERROR(hardware_.DecodeRgb({im.bytes, im.length}, &hardware_rgb_, &w, &h));
      if (w != im.width || h != im.height) return Internal("stand-in: the JPEG's size differs from its header's");
      std::memcpy(im.out, hardware_rgb_.data(), static_cast<size_t>(w) * h * 3);
      if (options_.delay_us_per_image > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(options_.delay_us_per_image));
      }
    }
    return Status::Ok();
  }

  const StandInGpuOptions options_;
  std::mutex mu_;
  ImageDecoder decoder_;       // guarded by mu_
  std::vector<uint8_t> rgb_;   // guarded by mu_
  std::vector<uint8_t> tmp_;   // guarded by mu_
  std::vector<std::shared_ptr<std::vector<std::vector<uint8_t>>>> abandoned_;  // guarded by mu_
  // The "hardware": used by the batcher's worker only.
  ImageDecoder hardware_;
  std::vector<uint8_t> hardware_rgb_;
  std::mutex stall_mu_;
  std::condition_variable stall_cv_;
  int runs_ = 0;           // guarded by stall_mu_
  bool released_ = false;  // guarded by stall_mu_
  HardwareBatcher batcher_;  // last: its worker uses the members above, and is joined first
};

}  // namespace

std::shared_ptr<GpuDecoder> MakeStandInGpuDecoder(StandInGpuOptions options) {
  return std::make_shared<StandInGpuDecoder>(options);
}

}  // namespace stoker
