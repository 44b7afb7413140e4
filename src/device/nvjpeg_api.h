// device/nvjpeg_api.h — libnvjpeg and the CUDA driver's module calls, found
// at run time, as device/cuda_runtime.h finds libcudart: stoker builds and
// imports with neither, and GPU decode says what it looked for where they
// are missing.
//
// libnvjpeg: $STOKER_NVJPEG (a file) alone when set; else the newest
// (nvjpegGetProperty's version) of those found: one the process already
// loaded (torchvision's bundled 13.0), the CUDA search directories' (the
// Python package adds the nvidia-nvjpeg wheel's nvidia/cu13/lib: 13.3), the
// system's. On a tie, the first found in that order.
// libcuda (the driver): only to load stoker's kernels (cuModuleLoadData of
// the fatbin built by nvcc, device/gpu_kernels.h) and launch them on the
// runtime's streams, which are the driver's streams.
// Only the declarations stoker calls are here; their values are nvJPEG's
// and the driver's ABI (nvjpeg.h, cuda.h), stable across 12 and 13.
// Thread-safety: the loaders are safe from any thread (load once); the
// functions are the libraries' own.
#pragma once

#include <cstddef>
#include <string>

#include "stoker/status.h"

namespace stoker::nvjpeg {

using Status_ = int;  // nvjpegStatus_t; 0 success
using Handle = void*;
using State = void*;
using JpegStream = void*;
inline constexpr int kBackendDefault = 0;
inline constexpr int kBackendHardware = 3;
inline constexpr int kOutputRgbi = 5;
inline constexpr int kCss444 = 0;  // nvjpegChromaSubsampling_t: the largest buffers PreAllocate can size
inline constexpr int kMaxComponent = 4;

struct Image {  // nvjpegImage_t
  unsigned char* channel[kMaxComponent];
  size_t pitch[kMaxComponent];
};

struct Api {
  std::string path;
  std::string version;  // "13.3.0", from nvjpegGetProperty
  int version_code = 0; // major * 10000 + minor * 100 + patch
  Status_ (*CreateEx)(int backend, void* dev_allocator, void* pinned_allocator, unsigned flags, Handle*);
  Status_ (*Destroy)(Handle);
  Status_ (*JpegStateCreate)(Handle, State*);
  Status_ (*JpegStateDestroy)(State);
  Status_ (*DecodeBatchedInitialize)(Handle, State, int batch_size, int max_cpu_threads, int output_format);
  Status_ (*DecodeBatched)(Handle, State, const unsigned char* const* data, const size_t* lengths, Image* out,
                           void* stream);
  Status_ (*JpegStreamCreate)(Handle, JpegStream*);
  Status_ (*JpegStreamDestroy)(JpegStream);
  Status_ (*JpegStreamParseHeader)(Handle, const unsigned char*, size_t, JpegStream);
  Status_ (*DecodeBatchedSupported)(Handle, JpegStream, int* is_supported);  // 0: supported
  Status_ (*GetHardwareDecoderInfo)(Handle, unsigned* engines, unsigned* cores_per_engine);
  // Device memory for batches up to batch_size images of width x height, so
  // nvjpegDecodeBatched does not free and allocate inside the call (as DALI
  // and nvImageCodec call it).
  Status_ (*DecodeBatchedPreAllocate)(Handle, State, int batch_size, int width, int height, int chroma_subsampling,
                                      int output_format);
  Status_ (*GetProperty)(int type, int* value);  // libraryPropertyType: 0 major, 1 minor, 2 patch

  // "nvjpegDecodeBatched failed: NVJPEG_STATUS_... (n)" as a Status.
  ::stoker::Status Check(Status_ s, const char* what) const;
};

Result<const Api*> LoadNvjpeg();

}  // namespace stoker::nvjpeg

namespace stoker::cudrv {

using Result_ = int;  // CUresult
using Module = void*;
using Function = void*;

struct Driver {
  std::string path;
  Result_ (*ModuleLoadData)(Module*, const void* image);
  Result_ (*ModuleGetFunction)(Function*, Module, const char* name);
  Result_ (*LaunchKernel)(Function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared_bytes, void* stream, void** params, void** extra);
  Result_ (*GetErrorString)(Result_, const char**);
  ::stoker::Status Check(Result_ r, const char* what) const;
};

Result<const Driver*> LoadDriver();

}  // namespace stoker::cudrv
