// pipeline/gpu_decode.h — image fields decoded on the device the batches go
// to (ImageSpec::decode), beside the CPU decoders, and how each batch's
// images are divided between them.
//
// A batch's last GpuSlots(size) slots send their JPEGs to the GPU decoder:
// on the decode thread Stage() reads the JPEG's header, plans the sample's
// geometry from its seed exactly as the CPU path does (so crop boxes and
// flips are the same), and copies the compressed bytes into the slot's own
// pinned host bytes (a slot usually holds far more than its JPEG; a larger
// one goes to a buffer the batch keeps, GpuJobs::large); what the decoder
// refuses decodes on the CPU there and then, counted by reason. When the batch is complete its copy carries those bytes, and
// Work() is run on the copy's stream after it (device/gpu_decoder.h).
//
// The split (decode="auto"): the GPU's share of each batch follows the
// measured rates, share = gpu / (gpu + cpu), where gpu is images per second
// of device time (the batch's copy and decodes, from its events: the
// measured rate, not scaled by batches in flight), and cpu is the decode
// threads in effect over the mean CPU time of one image; both are smoothed.
// decode="gpu" sends every image (share 1). A decoder the watchdog turned
// off (GpuDecoder::dead) gets none (share 0), and says why. The share and
// its reason show in settings and stats.
// Thread-safety: Stage, CpuDecoded, GpuSlots, DeviceTime from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "device/copy_engine.h"
#include "device/gpu_decoder.h"
#include "pipeline/batch_layout.h"
#include "stoker/loader.h"
#include "stoker/stats.h"

namespace stoker {

// One batch's staged images, and the bytes of those larger than their slot.
struct GpuJobs {
  std::mutex mu;
  std::vector<ImageJob> jobs;                   // guarded by mu
  std::vector<std::unique_ptr<uint8_t[]>> large;  // guarded by mu; jobs point into them

  // A failed sample's slot was filled on the CPU (the indexed mode's
  // refill): the images it staged before failing must not land over it.
  void Drop(int slot);
  // Slot `to` repeats slot `from` (the stream's skip rule copies the slot's
  // host bytes, which hold `from`'s staged JPEGs, not pixels): `from`'s
  // images decode into `to` too, from the same bytes, and what `to` staged
  // itself is dropped.
  void Repeat(int from, int to, const BatchLayout& layout);
};

class GpuDecode {
 public:
  // Null when no image field decodes on the GPU (every decode "cpu", or
  // "auto" on a CPU device). decode="gpu" where there is no GPU decoder:
  // FailedPrecondition saying why; "auto" then runs on the CPU, and
  // settings say why (set in *why_not).
  static Result<std::shared_ptr<GpuDecode>> Create(const LoaderOptions& o, const BatchLayout& layout,
                                                   std::string* why_not);
  ~GpuDecode() { decoder_->Trim(); }

  int GpuSlots(int batch_size) const;
  bool Decodes(size_t field) const { return field < specs_.size() && on_gpu_[field]; }
  // true: staged (the slot, or GpuJobs::large, holds the JPEG's bytes; a job was added);
  // false: the CPU decodes it (refused, counted).
  bool Stage(size_t field, std::span<const uint8_t> data, uint64_t seed, int slot, std::span<uint8_t> out,
             uint64_t out_offset, GpuJobs* jobs);
  void CpuDecoded(uint64_t ns);
  void SetDecodeThreads(int n) { threads_.store(n); }
  // The batch's GPU work for its copy (empty when it staged nothing). It
  // refers to this object: the copy's stage keeps it alive until the copy is done.
  StreamWork Work(GpuJobs& jobs, uint8_t* device_base);
  // A batch's copy with `images` GPU decodes took `seconds` on the device.
  void DeviceTime(int images, double seconds);

  void Fill(RecorderSnapshot* s) const;
  std::string decoder_name() const { return decoder_->name(); }

 private:
  GpuDecode(std::shared_ptr<GpuDecoder> decoder, std::vector<GpuOutputSpec> specs, std::vector<ImageSpec> images,
            std::vector<bool> on_gpu, bool all)
      : decoder_(std::move(decoder)), specs_(std::move(specs)), images_(std::move(images)),
        on_gpu_(std::move(on_gpu)), all_(all) {}
  void Resplit();  // REQUIRES mu_

  const std::shared_ptr<GpuDecoder> decoder_;
  const std::vector<GpuOutputSpec> specs_;  // per field of the layout
  const std::vector<ImageSpec> images_;     // per field: the spec PlanSample plans with
  const std::vector<bool> on_gpu_;          // per field: an image field that decodes on the GPU
  const bool all_;                          // decode="gpu": share 1
  std::atomic<int> threads_{1};
  std::atomic<double> share_{0.75};         // before any measurement: most to the engines
  std::atomic<uint64_t> cpu_images_{0}, cpu_ns_{0};  // images the CPU decoders decoded, and their time
  std::atomic<uint64_t> device_images_{0}, cpu_fallbacks_{0};  // this loader's, from each Decode's counts
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> refused_;  // guarded by mu_
  double cpu_s_per_image_ = 0;               // guarded by mu_; smoothed
  double gpu_images_per_s_ = 0;              // guarded by mu_; smoothed
  uint64_t cpu_seen_ns_ = 0, cpu_seen_ = 0;  // guarded by mu_: the totals at the last resplit
  std::string why_ = "no batch measured yet";  // guarded by mu_
};

}  // namespace stoker
