// codecs/resample.h — Pillow's antialiased resample (Image.resize with
// BILINEAR or BICUBIC, reducing_gap=None) of an 8-bit HWC RGB image, bit for
// bit, evaluated only on a window of the output.
//
// Why a window: torchvision's Resize(S) + CenterCrop(C) resizes the whole
// image, then keeps C x C pixels. The coefficients of the kept outputs do not
// depend on the others, so computing only those rows and columns (and only
// the source rows and columns their filter support reaches) gives exactly
// Pillow's pixels at a fraction of the cost. Any decoder (JPEG now, PNG/WebP
// later) that has RGB pixels calls PlanResampleAxis for x and y, decodes at
// least the source span the axes report, then ResampleRgb.
// Speed: the vertical pass runs 32 bytes at a time with AVX2 and the
// horizontal pass one output pixel and four taps per AVX2 pmaddwd (the 22-bit
// weights split into exact 11-bit halves), chosen at run time
// (__builtin_cpu_supports); other CPUs take the scalar loops. Same integers
// either way, so the same pixels. A decoder that makes its RGB row by row
// as planes (jpeg_raw_resample.h) takes ResampleRgbPlanarRows instead: one
// channel's taps 0-1 (or 2-3) of eight outputs per pmaddwd, the horizontal rows kept
// in a small ring and each output row made as soon as its taps are in, and
// a planar (CHW) result, so nothing is interleaved or held whole.
// Arithmetic (Pillow's src/libImaging/Resample.c): coefficients in double
// from the filter with support scaled by the reduction, normalized per
// output, converted to fixed point with 22 fractional bits (round half away
// from zero); a horizontal pass first, rounding to uint8 (clip8), then a
// vertical pass, rounding again. An axis that maps the source onto itself
// unchanged is skipped, as Pillow skips it.
// Thread-safety: pure functions; they write only the buffers they are given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/sample_geometry.h"
#include "stoker/image_spec.h"

namespace stoker {

// What an axis was planned for (PlanResampleAxis's arguments).
struct ResampleAxisKey {
  Resample filter = Resample::kBilinear;
  int in_size = 0;
  double in0 = 0, in1 = 0;
  int out_size = 0, first = 0, count = 0;
  bool operator==(const ResampleAxisKey&) const = default;
};

// One axis: output pixels [first, first + count) of a resize of the source
// interval [in0, in1) (source pixels, may be fractional) onto out_size
// pixels, over a source of in_size pixels (the filter is clamped to it).
struct ResampleAxis {
  int first = 0, count = 0;
  int in_size = 0;
  int ksize = 0;
  bool identity = false;       // source copied unchanged (Pillow skips the pass)
  std::vector<int32_t> start;  // per output: first source pixel
  std::vector<int32_t> taps;   // per output: number of source pixels
  std::vector<int32_t> coeff;  // per output: ksize fixed-point weights
  // The same weights for the AVX2 horizontal pass, split exactly as
  // k = hi * 2^11 + lo (lo in [0, 2^11)) so both halves fit int16 and
  // pmaddwd gives the same integers: per output, `quads` groups of 4 taps,
  // each 32 int16 (hi then lo), laid out as the pass's shuffled pixel
  // vector wants them (R0 R1 R2 R3 G0 G1 G2 G3 | B0 B1 B2 B3 0 0 0 0).
  int quads = 0;                 // (ksize + 3) / 4
  std::vector<int32_t> start3;   // per output: 3 * start, the first tap's byte
  std::vector<int16_t> quad_k;   // count * quads * 32
  std::vector<uint8_t> out_quads;  // per output: groups its own taps need
  int max_quads = 0;               // the most any output needs
  // Outputs [0, quad_end) may load 16 bytes per group inside [src_lo, src_hi)
  // (start increases with the output); the rest take the per-pixel loop.
  int quad_end = 0;
  int src_lo = 0, src_hi = 0;  // source pixels [src_lo, src_hi) the window reads
  // The planar AVX2 horizontal pass (ResampleRgbPlanarRows): one channel's
  // taps of two outputs per 128-bit lane, words picked from the 16 bytes at
  // the first output's first tap. Usable when every output has <= 4 taps and
  // four neighbours' taps lie within 16 bytes (planar).
  bool planar = false;
  std::vector<int16_t> planar_hi, planar_lo;  // per output: 4 weights, 11-bit halves as quad_k
  std::vector<uint8_t> planar_mask;           // per output i: pshufb mask of outputs i..i+3 (32 bytes)
  // The three-channel planar pass takes eight outputs per 256-bit vector:
  // lane 0 outputs i..i+3 from the 16 bytes at start[i], lane 1 i+4..i+7
  // from those at start[i+4]; one vector holds each output's taps 0, 1 as
  // words, another its taps 2, 3, so pmaddwd gives whole outputs (no hadd).
  // pair_mask: per output i, 64 bytes (taps 0-1 mask, taps 2-3 mask, each
  // both lanes); pair_k: per output, 8 int16 in four arrays of 2 per output
  // (taps 0-1 hi, taps 2-3 hi, taps 0-1 lo, taps 2-3 lo, count * 2 each).
  std::vector<uint8_t> pair_mask;
  std::vector<int16_t> pair_k;
  // The arguments this axis was last planned for: PlanResampleAxis with the
  // same ones leaves it as it is (no copy of its tables per image).
  ResampleAxisKey planned_for;
  bool planned = false;
};

// filter: kBilinear or kBicubic. The last few axes planned on the calling
// thread are kept (thread_local), so a repeated geometry is a copy.
void PlanResampleAxis(Resample filter, int in_size, double in0, double in1, int out_size, int first, int count,
                      ResampleAxis* axis);

// Resamples HWC RGB. `src` holds source pixels [src_x0, ...) x [src_y0, ...)
// with row stride src_stride bytes and must cover ax.src_lo..src_hi by
// ay.src_lo..src_hi, as one block of rows src_stride bytes apart (the SIMD
// pass may read a row's bytes past src_hi when the next row follows them;
// never past the last row's src_hi). Writes ax.count x ay.count RGB pixels to
// dst (row stride dst_stride). `tmp` is scratch, grown as needed and kept.
void ResampleRgb(const ResampleAxis& ax, const ResampleAxis& ay, const uint8_t* src, size_t src_stride, int src_x0,
                 int src_y0, uint8_t* dst, size_t dst_stride, std::vector<uint8_t>* tmp);

// The same resample with the source rows made on demand (a decoder that
// produces RGB one row at a time, e.g. jpeg_raw_resample.h): row(ctx, y)
// returns axis row y's pixels ax.src_lo..src_hi as HWC RGB (pixel src_lo
// first), readable for ResampleRowSlack(ax) bytes past src_hi; the pointer
// need stay valid only until the next call. Rows are asked for in increasing
// y, each once: ay.src_lo..src_hi (ay.first.. when ay is the identity).
using ResampleRowFn = const uint8_t* (*)(void* ctx, int y);
// Planar source rows (ax.planar only): row(ctx, y) returns the R row at
// pixel ax.src_lo; G and B follow at plane_stride and 2 plane_stride bytes,
// each readable for ResampleRowSlack(ax) bytes past src_hi. The output is
// planar too: output row i of channel c (ax.count bytes) at
// dst + i dst_stride + c dst_plane: dst_plane ax.count gives rows of R, G, B
// values one after the other, dst_plane = height x width a CHW image. Same
// pixels as ResampleRgb of the interleaved rows.
void ResampleRgbPlanarRows(const ResampleAxis& ax, const ResampleAxis& ay, ResampleRowFn row, void* ctx,
                           size_t plane_stride, uint8_t* dst, size_t dst_stride, size_t dst_plane,
                           std::vector<uint8_t>* tmp);
size_t ResampleRowSlack(const ResampleAxis& ax);
void ResampleRgbRows(const ResampleAxis& ax, const ResampleAxis& ay, ResampleRowFn row, void* ctx, uint8_t* dst,
                     size_t dst_stride, std::vector<uint8_t>* tmp);

// A sample's geometry (sample_geometry.h) as two axes over the image decoded
// at DCT scale 1/denom (decoded_w x decoded_h pixels, TJSCALED sizes).
// denom 1 is exact: the crop is the image the resize sees, as torchvision's
// crop-then-resize has it. denom > 1 maps the same box onto the scaled image,
// the filter clamped at the crop widened to whole scaled pixels (an
// approximation, bounded by ChooseResampleDenom).
struct GeometryResample {
  ResampleAxis ax, ay;
  int src_x0 = 0, src_y0 = 0;  // pixel (0,0) of the decoded image in axis coordinates
};
void PlanGeometryResample(const SampleGeometry& g, Resample filter, int denom, int decoded_w, int decoded_h,
                          GeometryResample* plan);

// The DCT scale a decoder may decode at and stay within the fidelity bound
// (mean |diff| <= 1, p99.9 <= 8 vs the exact path, tests/python/
// test_torchvision_fidelity.py): the largest of 8, 4, 2 that leaves the crop
// at least kDctHeadroom times the resized size on both axes, else 1.
// Measured on camera-like photographs (fine texture, sensor noise), every
// mode, worst mean / p99.9 |diff|: 1024x768..3000x2000 to 97..224: headroom
// 1: 1.00 / 14 (fails), 1.5: 0.73 / 6, 2: 0.37 / 4, 3: 0.18 / 2, 4: 0.14 / 2;
// 427..640 px photos to 32..97: headroom 2: 0.86 / 11 (fails), 3: 0.69 / 10
// (fails: 4:2:2 to 32 px), 4: 0.33 / 6 (kept).
inline constexpr double kDctHeadroom = 4.0;
int ChooseResampleDenom(const SampleGeometry& g);

}  // namespace stoker
