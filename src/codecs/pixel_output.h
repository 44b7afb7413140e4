// codecs/pixel_output.h — from decoded pixels to the caller's output slot:
// resized YCbCr planes -> RGB, CMYK -> RGB the way Pillow does it, and the
// final write with the spec's layout, dtype, normalization, flip and padding.
//
// Kept apart from the decoders so every decode path (region, TurboJPEG, the
// libjpeg fallback) ends in the same code, hence the same pixels.
// Thread-safety: pure functions; they write only the buffers they are given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "stoker/image_spec.h"
#include "codecs/scaled_crop.h"

namespace stoker {

// Pillow reads Adobe CMYK JPEGs as inverted ("CMYK;I") and converts with
// cmyk2rgb: out = nk - nk*c/255 (MULDIV255 rounding), nk = 255 - k.
// libjpeg-turbo hands back the stored bytes, so c = 255 - stored.
// `cmyk` holds `pixels` x 4 bytes, `rgb` receives `pixels` x 3.
void CmykToRgbLikePillow(const uint8_t* cmyk, size_t pixels, uint8_t* rgb);

// Resizes the cropped Y[,Cb,Cr] planes (src[c] is the window's top-left
// pixel, win[c] its size) to rw x rh and converts them to HWC RGB in `rgb`;
// `res` holds the 3 resized planes. subsamp is a TJSAMP_* value (gray, 444,
// 422, 420 or 440). Chroma keeps its subsampling through the resize (4:2:0 ->
// a 4:2:0 result) so it costs a quarter of luma; libyuv's *MatrixFilter
// converters then upsample it bilinearly, not by replication. 4:4:0 has no
// libyuv converter, so its chroma is resized to full size (4:4:4).
void PlanesToRgb(const uint8_t* const src[3], const int stride[3], const PlaneWindow win[3], int ncomp,
                 int subsamp, int rw, int rh, uint8_t* res, uint8_t* rgb);

// Writes the resized HWC RGB region (rw x rh) into the output slot with the
// spec's layout, dtype, normalization, flip and zero padding. One pass over
// the output; float conversion is a per-channel 256-entry table.
// `out` holds spec.OutputBytes() bytes; for float32 it is 4-byte aligned.
void WriteOutput(const uint8_t* rgb, int rw, int rh, const ImageSpec& spec, bool hflip, std::span<uint8_t> out);

// The same write from "planar rows": row y's R, G, B values are rw bytes
// each at rows + y * row_stride, + rw, + 2 rw (what the planar resample
// gives). A CHW uint8 output is then a copy per plane row.
void WriteOutputPlanarRows(const uint8_t* rows, size_t row_stride, int rw, int rh, const ImageSpec& spec, bool hflip,
                           std::span<uint8_t> out);

}  // namespace stoker
