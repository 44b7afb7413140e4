// device/nvjpeg_api.cc — see nvjpeg_api.h.
#include "device/nvjpeg_api.h"

#include <stdlib.h>

#include <memory>
#include <mutex>
#include <vector>

#include "device/cuda_runtime.h"
#include "device/shared_library.h"

namespace stoker {

namespace {

std::string List(const std::vector<std::string>& tried) {
  std::string s;
  for (const std::string& t : tried) s += "\n  " + t;
  return s;
}

constexpr const char* kNvjpegNames[] = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"};

}  // namespace

namespace nvjpeg {

::stoker::Status Api::Check(Status_ s, const char* what) const {
  if (s == 0) return ::stoker::Status::Ok();
  static const char* const kNames[] = {"SUCCESS", "NOT_INITIALIZED", "INVALID_PARAMETER", "BAD_JPEG",
                                       "JPEG_NOT_SUPPORTED", "ALLOCATOR_FAILURE", "EXECUTION_FAILED",
                                       "ARCH_MISMATCH", "INTERNAL_ERROR", "IMPLEMENTATION_NOT_SUPPORTED",
                                       "INCOMPLETE_BITSTREAM"};
  const std::string name = s >= 0 && s < 11 ? kNames[s] : "UNKNOWN";
  return Internal(std::string(what) + " failed: NVJPEG_STATUS_" + name + " (" + std::to_string(s) + ")");
}

namespace {

// Opens `path` into a fresh table with its version; null (the reason in `tried`) where it is not one.
std::unique_ptr<Api> OpenNvjpeg(const std::string& path, bool noload, std::vector<std::string>* tried) {
  auto api = std::make_unique<Api>();
  const std::vector<LibrarySymbol> syms = {
      {"nvjpegCreateEx", reinterpret_cast<void**>(&api->CreateEx)},
      {"nvjpegDestroy", reinterpret_cast<void**>(&api->Destroy)},
      {"nvjpegJpegStateCreate", reinterpret_cast<void**>(&api->JpegStateCreate)},
      {"nvjpegJpegStateDestroy", reinterpret_cast<void**>(&api->JpegStateDestroy)},
      {"nvjpegDecodeBatchedInitialize", reinterpret_cast<void**>(&api->DecodeBatchedInitialize)},
      {"nvjpegDecodeBatched", reinterpret_cast<void**>(&api->DecodeBatched)},
      {"nvjpegJpegStreamCreate", reinterpret_cast<void**>(&api->JpegStreamCreate)},
      {"nvjpegJpegStreamDestroy", reinterpret_cast<void**>(&api->JpegStreamDestroy)},
      {"nvjpegJpegStreamParseHeader", reinterpret_cast<void**>(&api->JpegStreamParseHeader)},
      {"nvjpegDecodeBatchedSupported", reinterpret_cast<void**>(&api->DecodeBatchedSupported)},
      {"nvjpegGetHardwareDecoderInfo", reinterpret_cast<void**>(&api->GetHardwareDecoderInfo)},
      {"nvjpegDecodeBatchedPreAllocate", reinterpret_cast<void**>(&api->DecodeBatchedPreAllocate)},
      {"nvjpegGetProperty", reinterpret_cast<void**>(&api->GetProperty)},
  };
  if (!OpenLibrary(path, noload, syms, tried)) return nullptr;
  int v[3] = {0, 0, 0};
  for (int t = 0; t < 3; ++t) api->GetProperty(t, &v[t]);
  api->version = std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
  api->version_code = v[0] * 10000 + v[1] * 100 + v[2];
  api->path = LibraryPathOf(reinterpret_cast<void*>(api->CreateEx), path);
  return api;
}

}  // namespace

Result<const Api*> LoadNvjpeg() {
  static std::mutex mu;
  static const Api* loaded = nullptr;
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  std::vector<std::string> tried;
  std::unique_ptr<Api> best;
  // A library opened twice (loaded, and found again on a path) is the same file: kept once.
  auto consider = [&](std::unique_ptr<Api> api) {
    if (api && (!best || api->version_code > best->version_code)) best = std::move(api);
  };
  if (const char* env = getenv("STOKER_NVJPEG"); env && *env) {
    best = OpenNvjpeg(env, false, &tried);
  } else {
    for (const char* name : kNvjpegNames) consider(OpenNvjpeg(name, true, &tried));
    for (const std::string& dir : cuda::CudaSearchDirs()) {
      bool any = false;
      for (const char* name : kNvjpegNames) {
        std::vector<std::string> quiet;
        std::unique_ptr<Api> api = OpenNvjpeg(dir + "/" + name, false, &quiet);
        if (api) {
          any = true;
          consider(std::move(api));
          break;  // one per directory: its names are links to one file
        }
      }
      if (!any) tried.push_back(dir + "/libnvjpeg.so* (none there)");
    }
    for (const char* name : kNvjpegNames) {
      std::unique_ptr<Api> api = OpenNvjpeg(name, false, &tried);
      if (api) {
        consider(std::move(api));
        break;
      }
    }
  }
  if (!best) {
    return FailedPrecondition("no libnvjpeg found for decode=\"gpu\": install the nvidia-nvjpeg wheel "
                              "(pip install nvidia-nvjpeg) or set STOKER_NVJPEG. Tried:" + List(tried));
  }
  loaded = best.release();
  return loaded;
}

}  // namespace nvjpeg

namespace cudrv {

::stoker::Status Driver::Check(Result_ r, const char* what) const {
  if (r == 0) return ::stoker::Status::Ok();
  const char* msg = nullptr;
  GetErrorString(r, &msg);
  return Internal(std::string(what) + " failed: " + (msg ? msg : "unknown") + " (CUDA driver error " +
                  std::to_string(r) + ")");
}

Result<const Driver*> LoadDriver() {
  static std::mutex mu;
  static const Driver* loaded = nullptr;
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  auto drv = std::make_unique<Driver>();
  const std::vector<LibrarySymbol> syms = {
      {"cuModuleLoadData", reinterpret_cast<void**>(&drv->ModuleLoadData)},
      {"cuModuleGetFunction", reinterpret_cast<void**>(&drv->ModuleGetFunction)},
      {"cuLaunchKernel", reinterpret_cast<void**>(&drv->LaunchKernel)},
      {"cuGetErrorString", reinterpret_cast<void**>(&drv->GetErrorString)},
  };
  std::vector<std::string> tried;
  void* handle = OpenLibrary("libcuda.so.1", false, syms, &tried);
  if (!handle) return FailedPrecondition("no CUDA driver (libcuda.so.1) to run stoker's kernels. Tried:" + List(tried));
  drv->path = LibraryPathOf(reinterpret_cast<void*>(drv->LaunchKernel), "libcuda.so.1");
  loaded = drv.release();
  return loaded;
}

}  // namespace cudrv

}  // namespace stoker
