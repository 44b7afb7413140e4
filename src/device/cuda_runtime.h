// device/cuda_runtime.h — the CUDA runtime, found at run time.
//
// stoker builds with no CUDA toolkit and runs unchanged where there is none:
// libcudart is dlopen'ed on first use and the few functions the pinned pool
// and the copy engine need are resolved into a table. The types and enums are
// declared here (their values are the runtime's ABI, stable since CUDA 4).
//
// Where it looks: $STOKER_CUDART (a file) alone when set; else, in order, a libcudart the process
// already loaded (torch's, once `import torch` ran), the directories given to
// AddCudaSearchDirs (the Python package passes torch's own `torch/lib` and the
// `nvidia-cuda-runtime-cu12` wheel's `nvidia/cuda_runtime/lib`), then the
// dynamic loader's default path. The error of a failed search names every
// place tried and why each failed.
// Thread-safety: LoadCudaRuntime is safe from any thread (loads once; a
// failed search is retried on the next call, so a later AddCudaSearchDirs
// counts). The table's functions are the runtime's own (thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::cuda {

using Error = int;          // cudaError_t; 0 is cudaSuccess
using Stream = void*;       // cudaStream_t; nullptr is the legacy default stream
using Event = void*;        // cudaEvent_t
inline constexpr Error kSuccess = 0;
inline constexpr Error kErrorNotReady = 600;              // cudaErrorNotReady
inline constexpr int kMemcpyHostToDevice = 1;             // cudaMemcpyHostToDevice
inline constexpr unsigned kHostRegisterDefault = 0;       // cudaHostRegisterDefault
inline constexpr unsigned kStreamNonBlocking = 1;         // cudaStreamNonBlocking
inline constexpr unsigned kEventDefault = 0;              // cudaEventDefault (timing on)
inline constexpr unsigned kEventDisableTiming = 2;        // cudaEventDisableTiming

struct Runtime {
  std::string path;  // the library that was loaded
  Error (*GetDeviceCount)(int*);
  Error (*SetDevice)(int);
  Error (*GetDevice)(int*);
  const char* (*GetErrorString)(Error);
  Error (*HostRegister)(void*, size_t, unsigned);
  Error (*HostUnregister)(void*);
  Error (*Malloc)(void**, size_t);
  Error (*Free)(void*);
  Error (*StreamCreateWithFlags)(Stream*, unsigned);
  Error (*StreamDestroy)(Stream);
  Error (*MemcpyAsync)(void*, const void*, size_t, int, Stream);
  Error (*EventCreateWithFlags)(Event*, unsigned);
  Error (*EventDestroy)(Event);
  Error (*EventRecord)(Event, Stream);
  Error (*EventQuery)(Event);
  Error (*EventSynchronize)(Event);
  Error (*EventElapsedTime)(float*, Event, Event);
  Error (*StreamWaitEvent)(Stream, Event, unsigned);
  Error (*StreamSynchronize)(Stream);

  // "cudaMemcpyAsync failed: <the runtime's message> (error 1)" as a Status.
  Status Check(Error e, const char* what) const;
};

// Adds directories to search (before the system's); duplicates are ignored.
void AddCudaSearchDirs(const std::vector<std::string>& dirs);
// Those directories, for the other CUDA libraries loaded at run time (libnvjpeg).
std::vector<std::string> CudaSearchDirs();

// The runtime, loaded once per process; FailedPrecondition naming every place
// tried when there is none. With require_device, also fails (naming the
// library) when it reports no CUDA device.
Result<const Runtime*> LoadCudaRuntime(bool require_device = true);

}  // namespace stoker::cuda
