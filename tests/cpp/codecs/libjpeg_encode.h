// tests/cpp/codecs/libjpeg_encode.h — JPEGs written through the libjpeg API,
// for what TurboJPEG 2.1 cannot write: restart markers, 4:4:0 with chosen
// factors, non-interleaved progressive. Shared by jpeg_test and
// jpeg_ycc_rows_test.
#pragma once

#include <cstdio>  // before jpeglib.h (FILE)
#include <jpeglib.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace stoker::test_data {

struct LibjpegLayout {
  int h_samp = 2, v_samp = 2;  // luma's sampling factors (chroma 1x1); ignored for gray
  bool progressive = false;
  int restart_rows = 0;        // a restart marker every this many MCU rows (0: none)
  int quality = 92;
};

// `img` is w x h x channels (1: gray, 3: RGB), interleaved.
inline std::vector<uint8_t> EncodeWithLibjpeg(const std::vector<uint8_t>& img, int w, int h, int channels,
                                              const LibjpegLayout& layout) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, layout.quality, TRUE);
  if (channels == 3) {
    c.comp_info[0].h_samp_factor = layout.h_samp;
    c.comp_info[0].v_samp_factor = layout.v_samp;
  }
  if (layout.progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = layout.restart_rows;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.data()) + static_cast<size_t>(c.next_scanline) * w * channels;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  free(buf);
  return out;
}

}  // namespace stoker::test_data
