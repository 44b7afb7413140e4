// device/gpu_kernels.cu — the kernels of gpu_kernels.h. Each thread calls the
// per-pixel functions the CPU stand-in calls (device/gpu_resize.h), so the
// arithmetic is the CPU path's. Built with --fmad=false (see resample_taps.h).
#include "device/gpu_kernels.h"
#include "device/gpu_resize.h"

using stoker::GpuOutputSpec;
using stoker::KernelJob;

extern "C" __global__ void stoker_horizontal(const KernelJob* jobs, const GpuOutputSpec* specs) {
  const KernelJob& k = jobs[blockIdx.z];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= k.job.win_w || r >= k.span_count) return;
  stoker::taps::Window span;
  span.first = k.span_first;
  span.count = k.span_count;
  stoker::gpu_resize::HorizontalPixel(k.rgb, k.pitch, k.job, specs[k.job.spec], span, r, i, k.tmp, k.tmp_pitch);
}

extern "C" __global__ void stoker_output(const KernelJob* jobs, const GpuOutputSpec* specs) {
  const KernelJob& k = jobs[blockIdx.z];
  const GpuOutputSpec& s = specs[k.job.spec];
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= s.width || y >= s.height) return;
  stoker::taps::Window span;
  span.first = k.span_first;
  span.count = k.span_count;
  stoker::gpu_resize::OutputPixel(k.tmp, k.tmp_pitch, span, k.job, s, x, y, k.out);
}
