// codecs/image_channels.h — image fields with other than 3 channels, and
// variable-size images: what Pillow's convert("L") / convert("RGBA") give.
//
// The RGB decoders (image_decoder.h) stay the one path to pixels: a 1-channel
// output is the luma of their RGB result with Pillow's rgb2l weights
// (L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16), which for a gray image
// (R = G = B) is its own gray value, so convert("L") of any 8-bit mode is
// matched bit for bit at full size. A 4-channel output adds the alpha plane
// decoded on its own (libspng's RGBA8 with tRNS applied, libwebp's RGBA;
// 255 for JPEG and images without alpha): Pillow resizes RGBA premultiplied,
// which this does not, so 4 channels take no resize (resize="none" or
// variable size).
// Thread-safety: pure functions on the caller's buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoker/image_spec.h"
#include "stoker/status.h"

namespace stoker {

// Pillow's rgb2l on `pixels` HWC RGB pixels.
void RgbToLLikePillow(const uint8_t* rgb, size_t pixels, uint8_t* l);

// The alpha plane (width * height bytes) of a PNG or WebP as Pillow's
// convert("RGBA") gives it; every other image (JPEG) is opaque: 255.
Status DecodeAlpha(std::span<const uint8_t> bytes, int width, int height, std::vector<uint8_t>& alpha);

// HWC uint8 pixels with spec.channels channels (`hwc`, h x w) into `out`:
// the spec's layout (CHW or HWC) and element type (uint8, or float32 x/255,
// normalized with mean[c]/std[c] for channels 1 and 3).
void WriteChannels(const uint8_t* hwc, int h, int w, const ImageSpec& spec, uint8_t* out);

}  // namespace stoker
