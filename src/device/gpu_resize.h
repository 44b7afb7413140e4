// device/gpu_resize.h — a decoded image to its output slot, one output pixel
// per call, for a GPU kernel's thread and for the stand-in decoder alike:
// the CPU path's crop -> Pillow resample -> flip/layout/dtype write
// (codecs/rgb_window.h, pixel_output.h), from full-size interleaved RGB.
//
// Two passes, as Pillow runs them: HorizontalPixel makes the rows the
// vertical taps need (source rows [RowSpan().first, + count) of the crop,
// one row of job.win_w pixels each) into a scratch image; OutputPixel
// resamples them down and writes one output pixel, zero outside the
// window (the longest-side padding).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#if !defined(__CUDACC__)
#include <vector>
#endif

#include "codecs/resample_taps.h"
#include "device/image_job.h"

namespace stoker::gpu_resize {

STOKER_HD taps::Axis AxisX(const ImageJob& j, const GpuOutputSpec& s) {
  return taps::MakeAxis(s.filter, j.crop_w, 0, j.crop_w, j.resized_w);
}
STOKER_HD taps::Axis AxisY(const ImageJob& j, const GpuOutputSpec& s) {
  return taps::MakeAxis(s.filter, j.crop_h, 0, j.crop_h, j.resized_h);
}

// The crop's rows the vertical pass reads: [first, first + count).
STOKER_HD taps::Window RowSpan(const ImageJob& j, const GpuOutputSpec& s) {
  const taps::Axis ay = AxisY(j, s);
  taps::Window span;
  if (j.win_h <= 0) return span;
  const taps::Window top = taps::WindowOf(ay, j.win_y), bottom = taps::WindowOf(ay, j.win_y + j.win_h - 1);
  span.first = top.first;
  span.count = bottom.first + bottom.count - top.first;  // windows move down with the output
  return span;
}

// Scratch row `r` (crop row span.first + r), column i of the window, from
// the decoded image `rgb` (pitch bytes per row).
STOKER_HD void HorizontalPixel(const uint8_t* rgb, long pitch, const ImageJob& j, const GpuOutputSpec& s,
                               const taps::Window& span, int r, int i, uint8_t* tmp, long tmp_pitch) {
  const taps::Axis ax = AxisX(j, s);
  const taps::Window w = taps::WindowOf(ax, j.win_x + i);
  const uint8_t* src = rgb + static_cast<long>(j.crop_y + span.first + r) * pitch + (j.crop_x + w.first) * 3L;
  taps::TapRgb(ax, w, src, 3, tmp + r * tmp_pitch + i * 3L);
}

// Output pixel (x, y) of the slot at `out`.
STOKER_HD void OutputPixel(const uint8_t* tmp, long tmp_pitch, const taps::Window& span, const ImageJob& j,
                           const GpuOutputSpec& s, int x, int y, uint8_t* out) {
  uint8_t px[3] = {0, 0, 0};
  const bool inside = x < j.win_w && y < j.win_h;
  if (inside) {
    const taps::Axis ay = AxisY(j, s);
    const taps::Window w = taps::WindowOf(ay, j.win_y + y);
    const int sx = j.hflip ? j.win_w - 1 - x : x;
    taps::TapRgb(ay, w, tmp + (w.first - span.first) * tmp_pitch + sx * 3L, tmp_pitch, px);
  }
  const long plane = static_cast<long>(s.width) * s.height;
  const long at = static_cast<long>(y) * s.width + x;
  for (int c = 0; c < 3; ++c) {
    const long i = s.chw ? c * plane + at : at * 3 + c;
    if (s.float32) {
      // WriteOutput's table: (v / 255 - mean) * inv_std; padding is 0.0f.
      const float v = inside ? (static_cast<float>(px[c]) / 255.0f - s.mean[c]) * s.inv_std[c] : 0.0f;
      reinterpret_cast<float*>(out)[i] = v;
    } else {
      out[i] = px[c];
    }
  }
}

#if !defined(__CUDACC__)
// Both passes on the host, in the kernels' order, into the slot at `out`
// (the stand-in decoder's, and the tests'); `tmp` is scratch.
inline void BothPassesOnHost(const uint8_t* rgb, long pitch, const ImageJob& j, const GpuOutputSpec& s,
                             std::vector<uint8_t>* tmp, uint8_t* out) {
  const taps::Window span = RowSpan(j, s);
  const long tmp_pitch = static_cast<long>(j.win_w) * 3;
  tmp->assign(static_cast<size_t>(span.count) * tmp_pitch, 0);
  for (int r = 0; r < span.count; ++r) {
    for (int i = 0; i < j.win_w; ++i) HorizontalPixel(rgb, pitch, j, s, span, r, i, tmp->data(), tmp_pitch);
  }
  for (int y = 0; y < s.height; ++y) {
    for (int x = 0; x < s.width; ++x) OutputPixel(tmp->data(), tmp_pitch, span, j, s, x, y, out);
  }
}
#endif

}  // namespace stoker::gpu_resize
