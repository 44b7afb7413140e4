// codecs/resize.cc — see resize.h.
// Thread-safety: pure function.
#include "codecs/resize.h"

#include <libyuv.h>

#include <cstring>

namespace stoker {

void ResizePlane(const uint8_t* src, int src_stride, int src_width, int src_height, uint8_t* dst,
                 int dst_stride, int dst_width, int dst_height) {
  if (src_width == dst_width && src_height == dst_height) {
    for (int y = 0; y < dst_height; ++y) {
      std::memcpy(dst + static_cast<size_t>(y) * dst_stride, src + static_cast<size_t>(y) * src_stride,
                  dst_width);
    }
    return;
  }
  libyuv::ScalePlane(src, src_stride, src_width, src_height, dst, dst_stride, dst_width, dst_height,
                     libyuv::kFilterBox);
}

}  // namespace stoker
