// device/shared_library.h — a library found at run time (dlopen) and the
// functions stoker calls resolved into a table of pointers: how libcudart,
// libnvjpeg and libcuda are loaded, so stoker builds and imports where none
// of them is installed.
// Thread-safety: pure apart from dlopen/dlerror (callers serialize their searches).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace stoker {

struct LibrarySymbol {
  const char* name;
  void** slot;  // receives the function's address
};

// Opens `path` (with noload: only if the process already loaded it) and
// resolves every symbol. The handle, or nullptr with the reason added to
// `tried` ("path (not found)", "path (lacks cudaMalloc)"; a noload miss adds nothing).
void* OpenLibrary(const std::string& path, bool noload, std::span<const LibrarySymbol> symbols,
                  std::vector<std::string>* tried);

// The file a resolved function came from (dladdr), else `fallback`.
std::string LibraryPathOf(void* function, const std::string& fallback);

}  // namespace stoker
