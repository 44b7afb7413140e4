// codecs/png.h — PNG to full-size interleaved RGB (8-bit) through libspng,
// converted exactly as Pillow's Image.open(f).convert("RGB") does:
//   palette -> its RGB entries; gray (1/2/4/8-bit) -> replicated;
//   alpha (LA, RGBA, tRNS) -> dropped, never composited;
//   16-bit RGB/RGBA/LA -> the high byte of each sample (Pillow's "RGB;16B");
//   16-bit gray -> min(v, 255) (Pillow's I;16 -> RGB clips, it does not scale).
// No gamma, sBIT or ICC is applied (Pillow applies none on open).
// Limits: at most 2^28 pixels (a decompression bomb is an error, not an OOM).
// Thread-safety: stateless; `rgb` belongs to the caller.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// Decodes `png` into `rgb` (resized to width * height * 3; never shrunk, so
// a reused vector does not reallocate). Errors say what libspng reported.
Status DecodePngRgb(std::span<const uint8_t> png, std::vector<uint8_t>& rgb, int* width, int* height);

}  // namespace stoker
