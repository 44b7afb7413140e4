// codecs/jpeg_region.h — region decode of one JPEG through the libjpeg API:
// the IDCT runs only on the iMCU rows and columns that hold the sample's crop.
//
// The fast path of JpegDecoder::DecodeInto for YCbCr or gray JPEGs in 4:4:4,
// 4:2:2, 4:2:0, 4:4:0, baseline or progressive, on libjpeg-turbo 2.1.x (see
// jpeg_region.cc for how and why). Its output equals the TurboJPEG
// full-plane path's bit for bit (jpeg_test.cc, RegionDecodeEqualsFullPlanePath).
// Thread-safety: uses the caller's decompressor and scratch, which belong to
// one JpegDecoder, hence one thread.
#pragma once

#include <cstdint>
#include <span>

#include "stoker/image_spec.h"
#include "stoker/status.h"

namespace stoker {

struct DecodeScratch;
struct LibJpeg;

// Decodes jpeg's crop for `sample_seed`, applies spec and writes
// spec.OutputBytes() bytes to out. Returns false, having touched nothing the
// caller sees, for a JPEG (or a build) it does not handle; the caller then
// takes the TurboJPEG path. Errors are DataLoss with libjpeg's message.
Result<bool> DecodeRegion(LibJpeg& lj, DecodeScratch& scratch, std::span<const uint8_t> jpeg,
                          const ImageSpec& spec, uint64_t sample_seed, std::span<uint8_t> out);

}  // namespace stoker
