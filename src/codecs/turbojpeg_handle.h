// codecs/turbojpeg_handle.h — RAII owner of a TurboJPEG handle (codecs
// internal: TurboJPEG types stay out of the public headers).
// Thread-safety: a handle is used by one thread at a time, as TurboJPEG requires.
#pragma once

#include <turbojpeg.h>

#include <memory>

namespace stoker {

struct TjDeleter {
  void operator()(void* h) const {
    if (h != nullptr) tjDestroy(h);
  }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

}  // namespace stoker
