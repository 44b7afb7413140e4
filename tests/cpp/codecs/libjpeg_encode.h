// tests/cpp/codecs/libjpeg_encode.h — JPEGs written through the libjpeg API,
// for what TurboJPEG 2.1 cannot write: restart markers, 4:4:0 and other
// per-component sampling factors of our choosing, non-interleaved
// progressive, CMYK/YCCK. Shared by jpeg_test and jpeg_ycc_rows_test.
#pragma once

#include <cstdio>  // before jpeglib.h (FILE)
#include <jpeglib.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

namespace stoker::test_data {

// `img` (w x h, interleaved, in_cs's channels) compressed with libjpeg's
// defaults for in_cs, then whatever `configure` sets.
inline std::vector<uint8_t> EncodeThroughLibjpeg(const std::vector<uint8_t>& img, int w, int h, J_COLOR_SPACE in_cs,
                                                 const std::function<void(jpeg_compress_struct&)>& configure) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = in_cs == JCS_CMYK ? 4 : in_cs == JCS_GRAYSCALE ? 1 : 3;
  c.in_color_space = in_cs;
  jpeg_set_defaults(&c);
  configure(c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.data()) + static_cast<size_t>(c.next_scanline) * w * c.input_components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  free(buf);
  return out;
}

struct LibjpegLayout {
  int h_samp = 2, v_samp = 2;  // luma's sampling factors (chroma 1x1); ignored for gray
  bool progressive = false;
  int restart_rows = 0;        // a restart marker every this many MCU rows (0: none)
  int quality = 92;
};

// Gray (channels 1) or RGB stored as YCbCr in `layout`.
inline std::vector<uint8_t> EncodeWithLibjpeg(const std::vector<uint8_t>& img, int w, int h, int channels,
                                              const LibjpegLayout& layout) {
  return EncodeThroughLibjpeg(img, w, h, channels == 1 ? JCS_GRAYSCALE : JCS_RGB, [&](jpeg_compress_struct& c) {
    jpeg_set_quality(&c, layout.quality, TRUE);
    if (channels == 3) {
      c.comp_info[0].h_samp_factor = layout.h_samp;
      c.comp_info[0].v_samp_factor = layout.v_samp;
    }
    if (layout.progressive) jpeg_simple_progression(&c);
    c.restart_in_rows = layout.restart_rows;
  });
}

// in_cs JCS_CMYK (4 channels) or JCS_RGB (3) stored as jpeg_cs (JCS_CMYK,
// JCS_YCCK: with the Adobe marker, as Pillow writes them; JCS_YCbCr), at
// quality 90, component c sampled samp[c] = {h, v}.
inline std::vector<uint8_t> EncodeWithFactors(const std::vector<uint8_t>& img, int w, int h, J_COLOR_SPACE in_cs,
                                              J_COLOR_SPACE jpeg_cs, const std::vector<std::pair<int, int>>& samp) {
  return EncodeThroughLibjpeg(img, w, h, in_cs, [&](jpeg_compress_struct& c) {
    jpeg_set_colorspace(&c, jpeg_cs);
    jpeg_set_quality(&c, 90, TRUE);
    for (size_t i = 0; i < samp.size(); ++i) {
      c.comp_info[i].h_samp_factor = samp[i].first;
      c.comp_info[i].v_samp_factor = samp[i].second;
    }
  });
}

}  // namespace stoker::test_data
