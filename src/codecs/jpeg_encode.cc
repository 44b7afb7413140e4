// codecs/jpeg_encode.cc — EncodeJpeg (see jpeg.h): baseline JPEG through
// TurboJPEG, for `stoker synth` and tests.
// Thread-safety: reentrant; each call makes its own TurboJPEG handle.
#include <turbojpeg.h>

#include <string>

#include "codecs/jpeg.h"
#include "codecs/turbojpeg_handle.h"

namespace stoker {

Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* pixels, int width, int height, int channels,
                                        int quality, int subsampling) {
  if (pixels == nullptr || width <= 0 || height <= 0) return InvalidArgument("EncodeJpeg: empty image");
  if (channels != 1 && channels != 3) return InvalidArgument("EncodeJpeg: channels must be 1 or 3");
  if (quality < 1 || quality > 100) return InvalidArgument("EncodeJpeg: quality must be in 1..100");
  int samp;
  switch (subsampling) {
    case 444: samp = TJSAMP_444; break;
    case 422: samp = TJSAMP_422; break;
    case 420: samp = TJSAMP_420; break;
    default: return InvalidArgument("EncodeJpeg: subsampling must be 444, 422 or 420");
  }
  if (channels == 1) samp = TJSAMP_GRAY;
  TjHandle h(tjInitCompress());
  if (!h) return Internal("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h.get(), pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, samp,
                  quality, 0) != 0) {
    Status s = Internal(std::string("JPEG encode: ") + tjGetErrorStr2(h.get()));
    tjFree(buf);
    return s;
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

}  // namespace stoker
