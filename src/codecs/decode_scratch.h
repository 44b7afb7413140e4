// codecs/decode_scratch.h — the buffers one JPEG decoder reuses across images.
//
// Why one struct: the region path (jpeg_region.cc) and the TurboJPEG path
// (jpeg.cc) run one at a time for a given decoder, so they share the same
// buffers; each grows to the largest image seen and stays, so a warm decoder
// does not allocate per image. The image-sized ones are ScratchBytes: huge
// pages, and no zero-fill (core/page_allocator.h), which cut a decoder's first
// image's page faults (S's 1500x1000 planes: about 1,500 faults of 3 us).
// Thread-safety: owned by one JpegDecoder, hence by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/jpeg_ycc_rows.h"
#include "core/page_allocator.h"

namespace stoker {

using ScratchBytes = std::vector<uint8_t, PageAllocator<uint8_t, /*kHugePages=*/true>>;

struct DecodeScratch {
  ScratchBytes decoded;           // YUV planes (region or full) or full RGB/CMYK
  std::vector<uint8_t> full_rgb;   // full-RGB paths: the decoded interleaved RGB (rgb_window.h's input)
  ScratchBytes planes;             // full-RGB paths: R, G, B planes of the decoded image
  ScratchBytes resized;            // 3 resized planes (Y,Cb,Cr or R,G,B)
  ScratchBytes rgb;                // resized region as HWC RGB
  std::vector<uint8_t> resample_tmp;  // resample.h: horizontal pass rows and accumulators
  std::vector<uint8_t*> row_ptrs;  // region paths: libjpeg's row pointers into `decoded`
  YccRows ycc_rows;                // Pillow-exact raw path: its RGB row maker (jpeg_raw_resample.h)
  std::vector<uint8_t> ycc_row;    // and the row it makes
};

// Grows a scratch buffer; never shrinks, so a warm decoder does not allocate.
// Its old bytes are not kept: every caller writes what it reads.
template <typename Alloc>
inline uint8_t* Grow(std::vector<uint8_t, Alloc>& v, size_t n) {
  if (v.size() < n) {
    v.clear();  // nothing to copy into the new block
    v.resize(n);
  }
  return v.data();
}

}  // namespace stoker
