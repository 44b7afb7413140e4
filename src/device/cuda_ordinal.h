// device/cuda_ordinal.h — a device name's CUDA ordinal, for the device stage
// and GPU decode alike (neither includes the other for it).
// Thread-safety: a pure function.
#pragma once

#include <cstdlib>
#include <string>

namespace stoker {

// "cuda" → 0, "cuda:3" → 3; -1 when `device` is not a CUDA device name.
inline int CudaOrdinal(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -1;
  char* end = nullptr;
  const long n = std::strtol(device.c_str() + 5, &end, 10);
  return (*end == '\0' && n >= 0 && n < 1024) ? static_cast<int>(n) : -1;
}

}  // namespace stoker
