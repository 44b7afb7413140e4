// pipeline/gpu_decode.cc — see gpu_decode.h.
#include "pipeline/gpu_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "codecs/image_format.h"
#include "codecs/jpeg_header.h"
#include "codecs/sample_geometry.h"
#include "device/cuda_ordinal.h"
#include "device/image_job_plan.h"

namespace stoker {

namespace {

constexpr double kSmooth = 0.3;  // weight of the newest measurement

}  // namespace

void GpuJobs::Drop(int slot) {
  std::lock_guard lock(mu);
  std::erase_if(jobs, [&](const ImageJob& j) { return j.slot == slot; });
}

void GpuJobs::Repeat(int from, int to, const BatchLayout& layout) {
  std::lock_guard lock(mu);
  std::erase_if(jobs, [&](const ImageJob& j) { return j.slot == to; });
  const size_t staged = jobs.size();
  for (size_t i = 0; i < staged; ++i) {
    if (jobs[i].slot != from) continue;
    ImageJob j = jobs[i];
    // An image field is one array: its slots are sample_bytes apart.
    const ArraySlot& out = layout.arrays[layout.fields[static_cast<size_t>(j.spec)].arrays[0]];
    j.out_offset = j.out_offset - out.sample_bytes * static_cast<size_t>(from) +
                   out.sample_bytes * static_cast<size_t>(to);
    j.slot = to;
    jobs.push_back(j);
  }
}

Result<std::shared_ptr<GpuDecode>> GpuDecode::Create(const LoaderOptions& o, const BatchLayout& layout,
                                                     std::string* why_not) {
  const bool late = o.device == "cpu-late";
  const int ordinal = CudaOrdinal(o.device);
  const bool device = late || ordinal >= 0;
  std::vector<GpuOutputSpec> specs(layout.fields.size());
  std::vector<bool> on_gpu(layout.fields.size(), false);
  std::vector<ImageSpec> images(layout.fields.size());
  bool any = false, forced = false, all = true;
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    const FieldSpec& field = layout.fields[f].spec;
    if (field.kind != FieldKind::kImage || field.image.decode == ImageDecode::kCpu) continue;
    const bool gpu = field.image.decode == ImageDecode::kGpu;
    if (gpu && !device) {
      return InvalidArgument("field '" + field.field + "': decode=\"gpu\" needs device=\"cuda\" (the batches' device "
                             "is where it decodes), not \"" + o.device + "\"");
    }
    if (!device) continue;
    if (field.image.resample == Resample::kBox) {  // libyuv's box filter has no GPU twin
      if (gpu) return InvalidArgument("field '" + field.field + "': decode=\"gpu\" needs resample bilinear or bicubic");
      continue;
    }
    specs[f] = OutputSpecOf(field.image);
    images[f] = field.image;
    on_gpu[f] = true;
    any = true;
    forced = forced || gpu;
    all = all && gpu;
  }
  if (!any) return std::shared_ptr<GpuDecode>();
  if (o.sample_map) {  // the user's map reads each sample's pixels on the CPU, before any copy
    if (forced) return InvalidArgument("decode=\"gpu\" cannot run with a map (the map reads the decoded pixels)");
    if (why_not) *why_not = "a map reads the decoded pixels on the CPU";
    return std::shared_ptr<GpuDecode>();
  }
  std::shared_ptr<GpuDecoder> decoder;
  if (late) {
    StandInGpuOptions standin;
    standin.delay_us_per_image = o.gpu_standin_delay_us;
    standin.stall_after_batches = o.gpu_standin_stall_after;
    standin.watchdog_ms = o.gpu_standin_watchdog_ms;
    decoder = MakeStandInGpuDecoder(standin);
  } else {
    Result<std::shared_ptr<GpuDecoder>> made = MakeNvjpegDecoder(ordinal);
    if (!made.ok()) {
      if (forced) return Status(made.status().code(), "decode=\"gpu\": " + made.status().message());
      if (why_not) *why_not = made.status().message();
      return std::shared_ptr<GpuDecode>();
    }
    decoder = std::move(made).value();
  }
  return std::shared_ptr<GpuDecode>(
      new GpuDecode(std::move(decoder), std::move(specs), std::move(images), std::move(on_gpu), all));
}

int GpuDecode::GpuSlots(int batch_size) const {
  if (decoder_->dead()) return 0;  // the watchdog gave up on it: the CPU decoders take every image
  if (all_) return batch_size;
  return static_cast<int>(std::lround(share_.load() * batch_size));
}

bool GpuDecode::Stage(size_t field, std::span<const uint8_t> data, uint64_t seed, int slot, std::span<uint8_t> out,
                      uint64_t out_offset, GpuJobs* jobs) {
  const char* refused = nullptr;
  SampleGeometry g;
  JpegHeader h;
  if (SniffImageFormat(data) != ImageFormat::kJpeg) {
    refused = "not_jpeg";
  } else if (Result<JpegHeader> read = ReadJpegHeader(data); !read.ok()) {
    refused = "bad_header";  // the CPU decoder gives it its typed error
  } else {
    h = *read;
    refused = decoder_->Refuses(h);
    if (!refused) {
      // The CPU path's own plan for the same seed (and its errors, e.g. kNone's size check, stay the CPU's).
      Result<SampleGeometry> planned = PlanSample(images_[field], h.width, h.height, seed);
      if (planned.ok()) {
        g = *planned;
      } else {
        refused = "geometry";
      }
    }
  }
  if (refused) {
    std::lock_guard lock(mu_);
    ++refused_[refused];
    return false;
  }
  ImageJob j = JobOf(g, h.width, h.height);
  std::unique_ptr<uint8_t[]> large;
  if (data.size() <= out.size()) {
    std::memcpy(out.data(), data.data(), data.size());
    j.bytes = out.data();
  } else {
    large = std::make_unique_for_overwrite<uint8_t[]>(data.size());
    std::memcpy(large.get(), data.data(), data.size());
    j.bytes = large.get();
  }
  j.length = static_cast<uint32_t>(data.size());
  j.out_offset = out_offset;
  j.spec = static_cast<int>(field);
  j.slot = slot;
  {
    std::lock_guard lock(jobs->mu);
    jobs->jobs.push_back(j);
    if (large) jobs->large.push_back(std::move(large));
  }
  return true;
}

void GpuDecode::CpuDecoded(uint64_t ns) {
  cpu_images_.fetch_add(1, std::memory_order_relaxed);
  cpu_ns_.fetch_add(ns, std::memory_order_relaxed);
}

StreamWork GpuDecode::Work(GpuJobs& jobs, uint8_t* device_base) {
  std::vector<ImageJob> mine;
  {
    std::lock_guard lock(jobs.mu);
    mine = jobs.jobs;
  }
  if (mine.empty()) return {};
  std::sort(mine.begin(), mine.end(), [](const ImageJob& a, const ImageJob& b) { return a.out_offset < b.out_offset; });
  return [this, jobs = std::move(mine), device_base](uintptr_t stream) {
    GpuDecodeCounts counts;
    Status st = decoder_->Decode(jobs, specs_, device_base, stream, &counts);
    device_images_.fetch_add(counts.device, std::memory_order_relaxed);
    cpu_fallbacks_.fetch_add(counts.cpu_fallbacks, std::memory_order_relaxed);
    return st;
  };
}

void GpuDecode::DeviceTime(int images, double seconds) {
  if (images <= 0 || seconds <= 0) return;
  std::lock_guard lock(mu_);
  // The measured rate: a batch's images over its device time (not scaled by
  // batches in flight, which would overstate it where they do not overlap).
  const double rate = images / seconds;
  gpu_images_per_s_ = gpu_images_per_s_ == 0 ? rate : (1 - kSmooth) * gpu_images_per_s_ + kSmooth * rate;
  Resplit();
}

void GpuDecode::Resplit() {
  const uint64_t n = cpu_images_.load(), ns = cpu_ns_.load();
  if (n > cpu_seen_ + 8) {  // enough new CPU images for a mean
    const double s = static_cast<double>(ns - cpu_seen_ns_) * 1e-9 / static_cast<double>(n - cpu_seen_);
    cpu_s_per_image_ = cpu_s_per_image_ == 0 ? s : (1 - kSmooth) * cpu_s_per_image_ + kSmooth * s;
    cpu_seen_ = n;
    cpu_seen_ns_ = ns;
  }
  if (all_) {
    why_ = "decode=\"gpu\": every image the decoder takes";
    return;
  }
  if (cpu_s_per_image_ == 0) {
    why_ = "GPU " + std::to_string(static_cast<int>(gpu_images_per_s_)) + " images/s; CPU not measured yet";
    return;
  }
  const double cpu = std::max(1, threads_.load()) / cpu_s_per_image_;
  const double share = std::clamp(gpu_images_per_s_ / (gpu_images_per_s_ + cpu), 0.02, 1.0);
  share_.store(share);
  char line[200];
  std::snprintf(line, sizeof line, "GPU %.0f images/s, CPU %.0f images/s (%d decoders at %.2f ms each): GPU %.0f%%",
                gpu_images_per_s_, cpu, std::max(1, threads_.load()), cpu_s_per_image_ * 1e3, share * 100);
  why_ = line;
}

void GpuDecode::Fill(RecorderSnapshot* s) const {
  s->gpu_decoder = decoder_->name();
  s->gpu_failure = decoder_->failure();
  s->gpu_share = !s->gpu_failure.empty() ? 0.0 : all_ ? 1.0 : share_.load();
  s->gpu_images = device_images_.load();
  s->gpu_cpu_fallbacks = cpu_fallbacks_.load();
  s->gpu_cpu_images = cpu_images_.load();
  std::lock_guard lock(mu_);
  s->gpu_share_why = s->gpu_failure.empty() ? why_ : "GPU decoder off: " + s->gpu_failure;
  s->gpu_refused.assign(refused_.begin(), refused_.end());
  if (s->gpu_cpu_fallbacks > 0) s->gpu_refused.emplace_back("decoder_failed", s->gpu_cpu_fallbacks);
}

}  // namespace stoker
