// device/gpu_kernels.h — stoker's CUDA kernels, as a fatbin built by nvcc
// from gpu_kernels.cu (SASS for sm_80 and sm_90, PTX for later GPUs) and
// embedded in the library; empty in a build without nvcc (the CMake option
// STOKER_CUDA_KERNELS), where GPU decode then says so. Loaded with the
// driver's cuModuleLoadData (device/nvjpeg_api.h) on first use, so the
// library links no CUDA.
//
// The two kernels run one batch's jobs (gridDim.z = jobs):
//   stoker_horizontal: thread (i, r) of job z makes scratch row r, column i;
//   stoker_output:     thread (x, y) of job z writes output pixel (x, y).
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/image_job.h"

namespace stoker {

// A job as the kernels see it: its decoded image and scratch rows in device memory.
struct KernelJob {
  ImageJob job;
  const uint8_t* rgb = nullptr;  // decoded interleaved RGB, job.width x job.height
  long long pitch = 0;
  uint8_t* tmp = nullptr;        // the horizontal pass's rows: span_count x job.win_w RGB
  long long tmp_pitch = 0;
  uint8_t* out = nullptr;        // the output slot
  int span_first = 0, span_count = 0;
};

extern const unsigned char kGpuKernelsFatbin[];
extern const size_t kGpuKernelsFatbinSize;  // 0: built without nvcc

inline constexpr const char* kHorizontalKernel = "stoker_horizontal";
inline constexpr const char* kOutputKernel = "stoker_output";

}  // namespace stoker
