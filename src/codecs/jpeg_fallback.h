// codecs/jpeg_fallback.h — whole-image decode through the libjpeg API for the
// JPEGs that TurboJPEG refuses at its header.
//
// Why: TurboJPEG 2.1's tjDecompressHeader3 fails ("Could not determine
// subsampling type") for any sampling layout it has no TJSAMP_* for, e.g. the
// CMYK files Pillow writes with subsampling=2 (C at 2x2; M, Y, K at 1x1) or
// subsampling=1. libjpeg decodes any layout, and Pillow decodes through it,
// so these files are ordinary images, not errors.
// Settings are Pillow's (libjpeg's defaults): ISLOW IDCT, fancy upsampling,
// out_color_space CMYK for CMYK/YCCK files (then CmykToRgbLikePillow), RGB
// otherwise (libjpeg replicates gray into R=G=B, as Pillow's L->RGB does). So
// at full size the result equals Pillow's decode bit for bit.
// Warnings are errors and >500 scans fail, as on every path
// (libjpeg_decompressor.h).
// Thread-safety: uses the caller's decompressor, which belongs to one
// JpegDecoder, hence one thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "codecs/decode_scratch.h"
#include "stoker/status.h"

namespace stoker {

struct LibJpeg;

struct LibjpegInfo {
  int width = 0;
  int height = 0;
  bool gray = false;  // one component
  bool cmyk = false;  // four components, CMYK or YCCK
};

// The header as libjpeg reads it. An error too for a color space this path
// cannot turn into RGB (neither gray, YCbCr, RGB, CMYK nor YCCK).
Result<LibjpegInfo> ReadLibjpegInfo(LibJpeg& lj, std::span<const uint8_t> jpeg);

// Decodes at DCT scale 1/denom (1, 2, 4 or 8) into `dst`, HWC RGB of sw x sh
// pixels (the scaled size, as TJSCALED computes it). `cmyk` is scratch for
// CMYK/YCCK files, grown as needed and kept.
Status DecodeRgbLibjpeg(LibJpeg& lj, std::span<const uint8_t> jpeg, int denom, int sw, int sh,
                        ScratchBytes& cmyk, uint8_t* dst);

}  // namespace stoker
