// codecs/jpeg_rgb_region.cc — RGB rectangle decode (see header).
// Thread-safety: see header.
#include "codecs/jpeg_rgb_region.h"

#include <algorithm>
#include <cstddef>

#include "codecs/libjpeg_decompressor.h"

namespace stoker {
namespace {

// Everything the guarded step reads and writes; PODs only (see
// libjpeg_decompressor.h: a longjmp out of the step skips no destructor).
struct RgbRegionJob {
  int denom;
  int x0, x1, y0, y1;
  bool read_to_end;
  uint8_t* dst;
  size_t capacity;
  // out
  int out_x0;
  size_t stride;
};

void RgbRegionStep(j_decompress_ptr c, void* arg) {
  RgbRegionJob& j = *static_cast<RgbRegionJob*>(arg);
  c->scale_num = 1;
  c->scale_denom = static_cast<unsigned int>(j.denom);
  c->out_color_space = JCS_RGB;
  c->dct_method = JDCT_ISLOW;       // Pillow's (libjpeg's default)
  c->do_fancy_upsampling = TRUE;    // Pillow's (libjpeg's default)
  jpeg_start_decompress(c);
  const int width = static_cast<int>(c->output_width), height = static_cast<int>(c->output_height);
  const int y1 = std::min(j.y1, height);
  // One iMCU of margin each side: the upsampler's edge rule stays outside.
  const int imcu = c->max_h_samp_factor * c->min_DCT_scaled_size;
  JDIMENSION xoff = static_cast<JDIMENSION>(std::max(0, j.x0 - imcu));
  JDIMENSION cw = static_cast<JDIMENSION>(std::min(width, j.x1 + imcu)) - xoff;
  if (xoff > 0 || static_cast<int>(cw) < width) jpeg_crop_scanline(c, &xoff, &cw);
  j.out_x0 = static_cast<int>(xoff);
  j.stride = static_cast<size_t>(cw) * 3;
  if (j.stride * static_cast<size_t>(std::max(0, y1 - j.y0)) > j.capacity) {
    FailWith(reinterpret_cast<j_common_ptr>(c), "region larger than planned (cannot happen)");
  }
  if (j.y0 > 0) jpeg_skip_scanlines(c, static_cast<JDIMENSION>(j.y0));
  while (static_cast<int>(c->output_scanline) < y1) {
    JSAMPROW row = j.dst + static_cast<size_t>(static_cast<int>(c->output_scanline) - j.y0) * j.stride;
    if (jpeg_read_scanlines(c, &row, 1) != 1) {
      FailWith(reinterpret_cast<j_common_ptr>(c), "suspended (cannot happen: memory source)");
    }
  }
  if (j.read_to_end) {
    if (c->output_scanline < c->output_height) jpeg_skip_scanlines(c, c->output_height - c->output_scanline);
    jpeg_finish_decompress(c);  // a missing end is a warning, so an error
  }
}

}  // namespace

Status DecodeRgbRegion(LibJpeg& lj, std::span<const uint8_t> jpeg, int denom, int x0, int x1, int y0, int y1,
                       ScratchBytes& buf, RgbRegion* region) {
  if (!lj.ok) return Internal("jpeg_create_decompress failed");
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  AbortOnExit reset{&lj.cinfo};
  HeaderArgs header{jpeg.data(), jpeg.size()};
  if (!Guarded(&lj, ReadHeaderStep, &header)) return LibjpegError(lj, "header");
  // The widest the cropped row can be is the scaled image's width.
  const size_t full_w = (lj.cinfo.image_width + denom - 1) / denom;
  const size_t rows = static_cast<size_t>(std::max(0, y1 - y0));
  const size_t capacity = full_w * 3 * rows;
  Grow(buf, capacity + 16);
  const size_t n = jpeg.size();
  RgbRegionJob job{};
  job.denom = denom;
  job.x0 = x0;
  job.x1 = x1;
  job.y0 = y0;
  job.y1 = y1;
  job.read_to_end = !(n >= 2 && jpeg[n - 2] == 0xFF && jpeg[n - 1] == 0xD9);
  job.dst = buf.data();
  job.capacity = capacity;
  if (!Guarded(&lj, RgbRegionStep, &job)) return LibjpegError(lj, "decode");
  region->data = buf.data();
  region->stride = job.stride;
  region->x0 = job.out_x0;
  region->y0 = y0;
  return Status::Ok();
}

}  // namespace stoker
