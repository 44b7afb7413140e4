// codecs/rgb_window.h — the one path from a decoded, interleaved HWC RGB
// image to a sample's output slot: crop window -> resize -> WriteOutput.
//
// Every decoder whose output is full interleaved RGB ends here: JPEG's
// TurboJPEG/CMYK/libjpeg fallback (at its DCT scale) and PNG and WebP (at
// 1/1), so a change to the resize lands in all of them at once.
// Thread-safety: pure apart from `scratch`, which belongs to the caller's
// thread.
#pragma once

#include <cstdint>
#include <span>

#include "codecs/decode_scratch.h"
#include "codecs/scaled_crop.h"
#include "stoker/image_spec.h"
#include "stoker/status.h"

namespace stoker {

// `rgb` holds p.sw x p.sh interleaved RGB; the window (p.cx0, p.cy0, p.cw,
// p.ch) is resized to rw x rh (mode kNone: copied as is; the window must be
// the whole image) and written to `out` with the spec's layout, flip, dtype.
// Uses scratch.planes, scratch.resized and scratch.rgb; `rgb` may not alias
// them.
void RgbWindowToOutput(const uint8_t* rgb, const ScaledPlan& p, int rw, int rh, const ImageSpec& spec,
                       bool hflip, DecodeScratch& scratch, std::span<uint8_t> out);

// For a decoder of full-size RGB (PNG, WebP): plans the sample's geometry
// from its seed and writes it, through resample.h's Pillow-exact filter
// unless spec.resample is kBox (then RgbWindowToOutput's libyuv path). `out` holds spec.OutputBytes() bytes.
Status FullRgbToOutput(const uint8_t* rgb, int width, int height, const ImageSpec& spec, uint64_t sample_seed,
                       DecodeScratch& scratch, std::span<uint8_t> out);

}  // namespace stoker
