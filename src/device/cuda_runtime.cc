#include "device/cuda_runtime.h"

#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "device/shared_library.h"

namespace stoker::cuda {

namespace {

// Sonames of the runtimes whose ABI the table matches (12 first: the one
// torch's CUDA wheels carry), then the unversioned development link.
constexpr const char* kNames[] = {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"};

std::mutex g_mu;
std::vector<std::string> g_dirs;       // guarded by g_mu
const Runtime* g_runtime = nullptr;    // guarded by g_mu; never freed once loaded (the library stays loaded)

// Tries one candidate: opened (or, with noload, only if already loaded) and complete.
const Runtime* TryOpen(const std::string& path, bool noload, std::vector<std::string>* tried) {
  auto rt = std::make_unique<Runtime>();
  const LibrarySymbol symbols[] = {
      {"cudaGetDeviceCount", reinterpret_cast<void**>(&rt->GetDeviceCount)},
      {"cudaSetDevice", reinterpret_cast<void**>(&rt->SetDevice)},
      {"cudaGetDevice", reinterpret_cast<void**>(&rt->GetDevice)},
      {"cudaGetErrorString", reinterpret_cast<void**>(&rt->GetErrorString)},
      {"cudaHostRegister", reinterpret_cast<void**>(&rt->HostRegister)},
      {"cudaHostUnregister", reinterpret_cast<void**>(&rt->HostUnregister)},
      {"cudaMalloc", reinterpret_cast<void**>(&rt->Malloc)},
      {"cudaFree", reinterpret_cast<void**>(&rt->Free)},
      {"cudaStreamCreateWithFlags", reinterpret_cast<void**>(&rt->StreamCreateWithFlags)},
      {"cudaStreamDestroy", reinterpret_cast<void**>(&rt->StreamDestroy)},
      {"cudaMemcpyAsync", reinterpret_cast<void**>(&rt->MemcpyAsync)},
      {"cudaEventCreateWithFlags", reinterpret_cast<void**>(&rt->EventCreateWithFlags)},
      {"cudaEventDestroy", reinterpret_cast<void**>(&rt->EventDestroy)},
      {"cudaEventRecord", reinterpret_cast<void**>(&rt->EventRecord)},
      {"cudaEventQuery", reinterpret_cast<void**>(&rt->EventQuery)},
      {"cudaEventSynchronize", reinterpret_cast<void**>(&rt->EventSynchronize)},
      {"cudaEventElapsedTime", reinterpret_cast<void**>(&rt->EventElapsedTime)},
      {"cudaStreamWaitEvent", reinterpret_cast<void**>(&rt->StreamWaitEvent)},
      {"cudaStreamSynchronize", reinterpret_cast<void**>(&rt->StreamSynchronize)},
  };
  if (OpenLibrary(path, noload, symbols, tried) == nullptr) return nullptr;
  rt->path = LibraryPathOf(reinterpret_cast<void*>(rt->GetDeviceCount), path);
  return rt.release();
}


const Runtime* Search(std::vector<std::string>* tried) {
  if (const char* env = getenv("STOKER_CUDART"); env && *env) {  // a choice: the only place tried
    return TryOpen(env, false, tried);
  }
  for (const char* name : kNames) {  // already in the process (torch's)
    if (const Runtime* rt = TryOpen(name, true, tried)) return rt;
  }
  for (const std::string& dir : g_dirs) {
    for (const char* name : kNames) {
      std::vector<std::string> quiet;  // a directory holds one soname: report the directory once
      if (const Runtime* rt = TryOpen(dir + "/" + name, false, &quiet)) return rt;
    }
    tried->push_back(dir + "/libcudart.so* (none there)");
  }
  for (const char* name : kNames) {
    if (const Runtime* rt = TryOpen(name, false, tried)) return rt;
  }
  return nullptr;
}

}  // namespace

Status Runtime::Check(Error e, const char* what) const {
  if (e == kSuccess) return Status::Ok();
  return Internal(std::string(what) + " failed: " + GetErrorString(e) + " (CUDA error " + std::to_string(e) + ")");
}

void AddCudaSearchDirs(const std::vector<std::string>& dirs) {
  std::lock_guard lock(g_mu);
  for (const std::string& d : dirs) {
    if (!d.empty() && std::find(g_dirs.begin(), g_dirs.end(), d) == g_dirs.end()) g_dirs.push_back(d);
  }
}

std::vector<std::string> CudaSearchDirs() {
  std::lock_guard lock(g_mu);
  return g_dirs;
}

Result<const Runtime*> LoadCudaRuntime(bool require_device) {
  std::lock_guard lock(g_mu);
  if (g_runtime == nullptr) {
    std::vector<std::string> tried;
    g_runtime = Search(&tried);
    if (g_runtime == nullptr) {
      std::string list;
      for (const std::string& t : tried) list += "\n  " + t;
      return FailedPrecondition(
          "no CUDA runtime (libcudart) found: stoker loads it at run time from torch's CUDA build, the "
          "nvidia-cuda-runtime-cu12 wheel or the system, and none of these is here. Tried (after the "
          "process's loaded libraries):" + list);
    }
  }
  if (require_device) {
    int count = 0;
    const Error e = g_runtime->GetDeviceCount(&count);
    if (e != kSuccess || count == 0) {
      return FailedPrecondition("the CUDA runtime " + g_runtime->path + " reports no usable CUDA device" +
                                (e != kSuccess ? std::string(": ") + g_runtime->GetErrorString(e) : std::string()));
    }
  }
  return g_runtime;
}

}  // namespace stoker::cuda
