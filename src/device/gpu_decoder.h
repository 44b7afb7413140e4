// device/gpu_decoder.h — the seam between the loader and a JPEG decoder that
// runs beside the CPU decoders on the device the batches go to.
//
//   decode thread: Refuses(header)? ─yes─▶ the CPU path decodes the slot
//                        │no
//                        ▼
//   compressed bytes copied into the slot's pinned host bytes, an ImageJob
//   ──(batch complete)──▶ the batch's copy on the engine's stream, then
//   Decode(jobs) on that stream: decode to device scratch, crop/resize/flip/
//   normalize kernels write each job's device slot ──▶ the copy's end event.
//
// So the consumer's wait on a batch (PendingCopy::NeededOn) covers its GPU
// decodes too, and a device buffer is reused only after both.
// Implementations:
//  * MakeNvjpegDecoder (nvjpeg_decoder.cc): libnvjpeg found at run time
//    (device/nvjpeg_api.h), its hardware engine where the GPU has one, else
//    its CUDA decoder; kernels from device/gpu_kernels.cu.
//  * MakeStandInGpuDecoder (standin_gpu_decoder.cc): for CI, with the CPU
//    copy engine: decodes on its "hardware" worker with libjpeg-turbo and the
//    kernels' own per-pixel arithmetic (codecs/resample_taps.h) compiled for the host.
// Both drive their hardware through one HardwareBatcher (hardware_batcher.h):
// one worker, batches sized to the engines, and a watchdog. Once it gives up
// on a hardware batch the decoder is dead(): Decode still decodes every job
// (on the CPU), and the loader sends no more images to it (GpuDecode::GpuSlots).
// Thread-safety: Refuses, dead, failure from any thread; Decode from any, serialized inside.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "codecs/jpeg_header.h"
#include "device/image_job.h"
#include "stoker/status.h"

namespace stoker {

// One Decode call's images: decoded on the device, and taken but failed by
// the device decoder, then decoded on the CPU.
struct GpuDecodeCounts {
  uint64_t device = 0;
  uint64_t cpu_fallbacks = 0;
};

class GpuDecoder {
 public:
  virtual ~GpuDecoder() = default;
  // "nvjpeg hardware", "nvjpeg cuda", "stand-in"
  virtual std::string name() const = 0;
  // nullptr when this decoder takes the JPEG; else why not (a fallback
  // counter's name, JpegHeader::GpuRefusal's or the decoder's own).
  virtual const char* Refuses(const JpegHeader& header) const = 0;
  // The watchdog gave up on its hardware: for the rest of the process (the
  // decoder is the process's), every image goes to the CPU.
  virtual bool dead() const { return false; }
  // "" while alive; else what happened (report() and settings say it).
  virtual std::string failure() const { return ""; }
  // A loader that used it is gone: give back memory kept for the next batch.
  virtual void Trim() {}
  // Queues the jobs' decodes on `stream` (the copy engine's, after the
  // batch's copy): each job's compressed bytes at job.bytes, its output
  // written at device_base + out_offset. The bytes must stay until the stream
  // passes this point (the batch keeps them: its lease and GpuJobs).
  // An image the GPU decoder fails is decoded on this thread by the CPU; one
  // both fail is the error. `counts` gets how many went where (a decoder is
  // shared by every loader of the process: each loader counts its own).
  virtual Status Decode(std::span<const ImageJob> jobs, std::span<const GpuOutputSpec> specs, uint8_t* device_base,
                        uintptr_t stream, GpuDecodeCounts* counts) = 0;
};

// Options of the stand-in (tests).
struct StandInGpuOptions {
  int delay_us_per_image = 0;    // slows the "device" down, to test the split
  int stall_after_batches = -1;  // >= 0: hardware batches after that many never return (until the decoder goes)
  int watchdog_ms = 0;           // the watchdog's least bound; 0: HardwareBatcherOptions' (2 s)
  int unit = 1;                  // its "engines × cores"
};
std::shared_ptr<GpuDecoder> MakeStandInGpuDecoder(StandInGpuOptions options);

// nvJPEG on CUDA device `device`, one per device for the process (shared by
// every loader); FailedPrecondition, naming what was looked for, where
// libnvjpeg, the CUDA driver or stoker's kernels (a build without nvcc) are missing.
Result<std::shared_ptr<GpuDecoder>> MakeNvjpegDecoder(int device);

}  // namespace stoker
