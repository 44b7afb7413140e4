// device/gpu_kernels_none.cc — the empty fatbin of a build without nvcc
// (gpu_kernels.h); a build with nvcc compiles a generated file instead.
#include "device/gpu_kernels.h"

namespace stoker {

const unsigned char kGpuKernelsFatbin[] = {0};
const size_t kGpuKernelsFatbinSize = 0;

}  // namespace stoker
