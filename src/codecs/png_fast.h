// codecs/png_fast.h — the common PNG kinds decoded with libdeflate instead of
// libspng's zlib inflate: 8-bit gray, RGB, RGBA and palette, not interlaced.
//
// Why: on photograph-like PNGs inflate is most of the decode, and
// libdeflate's whole-buffer inflate runs about twice as fast as zlib's
// streaming one. A PNG's IDAT chunks are one zlib stream; it is inflated in one
// call into the filtered scanlines, which are unfiltered row by row (for RGB
// straight into the output) and converted as png.h says (Pillow's rules).
//
// Anything else (16-bit, 1/2/4-bit, interlaced, unknown critical chunks) and
// anything that does not decode cleanly (bad CRC on a critical chunk, a zlib
// error, more or fewer bytes than the scanlines need) returns false: the
// caller then decodes with libspng, which owns the error messages.
// Thread-safety: each thread keeps its own decompressor and scratch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace stoker {

// True: `rgb` holds width * height * 3 bytes of the image.
bool DecodePngRgbFast(std::span<const uint8_t> png, std::vector<uint8_t>& rgb, int* width, int* height);

}  // namespace stoker
