// device/shared_library.cc — see shared_library.h.
#include "device/shared_library.h"

#include <dlfcn.h>

namespace stoker {

void* OpenLibrary(const std::string& path, bool noload, std::span<const LibrarySymbol> symbols,
                  std::vector<std::string>* tried) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | (noload ? RTLD_NOLOAD : 0));
  if (handle == nullptr) {
    if (!noload) {
      const char* why = dlerror();
      tried->push_back(path + " (" + (why ? why : "not found") + ")");
    }
    return nullptr;
  }
  for (const LibrarySymbol& s : symbols) {
    *s.slot = dlsym(handle, s.name);
    if (*s.slot == nullptr) {
      tried->push_back(path + " (lacks " + s.name + ")");
      dlclose(handle);
      return nullptr;
    }
  }
  return handle;
}

std::string LibraryPathOf(void* function, const std::string& fallback) {
  Dl_info info;
  if (dladdr(function, &info) != 0 && info.dli_fname) return info.dli_fname;
  return fallback;
}

}  // namespace stoker
