// device/standin_gpu_decoder.cc — the stand-in GPU decoder of gpu_decoder.h,
// for CI: with the CPU copy engine (late_copy_engine.cc) "device memory" is
// host memory and Decode runs on that engine's thread after the batch's copy,
// as nvJPEG's work runs on the copy stream. Each job is decoded whole by
// libjpeg-turbo (Pillow's pixels) and written by the kernels' own per-pixel
// functions (gpu_resize.h) in two passes, as the kernels run them; an
// optional delay per image makes it slower than the CPU decoders, to test
// how the split follows measured rates.
// Thread-safety: Decode is serialized by mu_.
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "codecs/image_decoder.h"
#include "device/gpu_decoder.h"
#include "device/gpu_resize.h"

namespace stoker {

namespace {

class StandInGpuDecoder : public GpuDecoder {
 public:
  explicit StandInGpuDecoder(StandInGpuOptions options) : options_(options) {}
  std::string name() const override { return "stand-in"; }
  const char* Refuses(const JpegHeader& h) const override { return h.GpuRefusal(); }

  Status Decode(std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs, uint8_t* device_base,
                uintptr_t, GpuDecodeCounts* counts) override {
    std::lock_guard lock(mu_);
    for (const ImageJob& j : jobs) {
      int w = 0, h = 0;
      STOKER_RETURN_IF_ERROR(decoder_.DecodeRgb({j.bytes, j.length}, &rgb_, &w, &h)
                                 .WithContext("slot " + std::to_string(j.slot)));
      gpu_resize::BothPassesOnHost(rgb_.data(), static_cast<long>(w) * 3, j, specs[j.spec], &tmp_,
                                   device_base + j.out_offset);
      if (options_.delay_us_per_image > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(options_.delay_us_per_image));
      }
    }
    counts->device += jobs.size();
    return Status::Ok();
  }

 private:
  const StandInGpuOptions options_;
  std::mutex mu_;
  ImageDecoder decoder_;       // guarded by mu_
  std::vector<uint8_t> rgb_;   // guarded by mu_
  std::vector<uint8_t> tmp_;   // guarded by mu_
};

}  // namespace

std::shared_ptr<GpuDecoder> MakeStandInGpuDecoder(StandInGpuOptions options) {
  return std::make_shared<StandInGpuDecoder>(options);
}

}  // namespace stoker
