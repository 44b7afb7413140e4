// codecs/jpeg_fallback.cc — libjpeg whole-image decode (see header).
// Thread-safety: see header.
#include "codecs/jpeg_fallback.h"

#include <cstddef>
#include <string>

#include "codecs/decode_scratch.h"
#include "codecs/libjpeg_decompressor.h"
#include "codecs/pixel_output.h"

namespace stoker {
namespace {

bool IsCmyk(const jpeg_decompress_struct& c) {
  return c.num_components == 4 && (c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK);
}

bool Decodable(const jpeg_decompress_struct& c) {
  if (c.num_components == 1) return c.jpeg_color_space == JCS_GRAYSCALE;
  if (c.num_components == 3) return c.jpeg_color_space == JCS_YCbCr || c.jpeg_color_space == JCS_RGB;
  return IsCmyk(c);
}

// What DecodeStep writes: sw x sh pixels of `components` bytes, rows
// `stride` bytes apart from `dst`.
struct DecodeJob {
  int denom;
  J_COLOR_SPACE out_color_space;
  JDIMENSION sw, sh;
  int components;
  uint8_t* dst;
  size_t stride;
};

void DecodeStep(j_decompress_ptr c, void* arg) {
  const DecodeJob& j = *static_cast<const DecodeJob*>(arg);
  c->scale_num = 1;
  c->scale_denom = static_cast<unsigned int>(j.denom);
  c->out_color_space = j.out_color_space;
  // libjpeg's defaults, set anyway: they are what Pillow decodes with.
  c->dct_method = JDCT_ISLOW;
  c->do_fancy_upsampling = TRUE;
  jpeg_start_decompress(c);
  // The caller sized `dst` from TJSCALED, which rounds as libjpeg does.
  if (c->output_width != j.sw || c->output_height != j.sh || c->output_components != j.components) {
    FailWith(reinterpret_cast<j_common_ptr>(c), "scaled size differs from the planned one (cannot happen)");
  }
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = j.dst + static_cast<size_t>(c->output_scanline) * j.stride;
    if (jpeg_read_scanlines(c, &row, 1) != 1) {
      FailWith(reinterpret_cast<j_common_ptr>(c), "suspended (cannot happen: memory source)");
    }
  }
  jpeg_finish_decompress(c);  // reads up to EOI: a missing end is a warning, so an error
}

}  // namespace

Result<LibjpegInfo> ReadLibjpegInfo(LibJpeg& lj, std::span<const uint8_t> jpeg) {
  if (!lj.ok) return Internal("jpeg_create_decompress failed");
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  AbortOnExit reset{&lj.cinfo};
  HeaderArgs header{jpeg.data(), jpeg.size()};
  if (!Guarded(&lj, ReadHeaderStep, &header)) return LibjpegError(lj, "header");
  const jpeg_decompress_struct& c = lj.cinfo;
  if (!Decodable(c)) {
    return DataLoss("JPEG header: " + std::to_string(c.num_components) + " components in color space " +
                    std::to_string(static_cast<int>(c.jpeg_color_space)) + " cannot be converted to RGB");
  }
  LibjpegInfo info;
  info.width = static_cast<int>(c.image_width);
  info.height = static_cast<int>(c.image_height);
  info.gray = c.num_components == 1;
  info.cmyk = IsCmyk(c);
  return info;
}

Status DecodeRgbLibjpeg(LibJpeg& lj, std::span<const uint8_t> jpeg, int denom, int sw, int sh,
                        ScratchBytes& cmyk, uint8_t* dst) {
  if (!lj.ok) return Internal("jpeg_create_decompress failed");
  if (jpeg.empty()) return DataLoss("JPEG is empty");
  AbortOnExit reset{&lj.cinfo};
  HeaderArgs header{jpeg.data(), jpeg.size()};
  if (!Guarded(&lj, ReadHeaderStep, &header)) return LibjpegError(lj, "header");
  if (!Decodable(lj.cinfo)) return DataLoss("JPEG header: color space cannot be converted to RGB");
  const bool is_cmyk = IsCmyk(lj.cinfo);
  const size_t pixels = static_cast<size_t>(sw) * sh;
  DecodeJob job{};
  job.denom = denom;
  job.out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
  job.sw = static_cast<JDIMENSION>(sw);
  job.sh = static_cast<JDIMENSION>(sh);
  job.components = is_cmyk ? 4 : 3;
  job.dst = is_cmyk ? Grow(cmyk, pixels * 4) : dst;
  job.stride = static_cast<size_t>(sw) * job.components;
  if (!Guarded(&lj, DecodeStep, &job)) return LibjpegError(lj, "decode");
  if (is_cmyk) CmykToRgbLikePillow(job.dst, pixels, dst);
  return Status::Ok();
}

}  // namespace stoker
