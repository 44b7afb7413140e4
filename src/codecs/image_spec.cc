// codecs/image_spec.cc — parsing and validation of ImageSpec.
// Thread-safety: pure functions on values.
#include "stoker/image_spec.h"

#include <algorithm>
#include <cmath>

namespace stoker {

Result<ResizeMode> ParseResizeMode(const std::string& name) {
  if (name == "none") return ResizeMode::kNone;
  if (name == "stretch") return ResizeMode::kStretch;
  if (name == "center_crop") return ResizeMode::kShorterCenterCrop;
  if (name == "longest") return ResizeMode::kLongestPad;
  if (name == "random_resized_crop") return ResizeMode::kRandomResizedCrop;
  return InvalidArgument("unknown resize mode '" + name +
                         "' (expected none, stretch, center_crop, longest or random_resized_crop)");
}

Result<Resample> ParseResample(const std::string& name) {
  if (name == "bilinear") return Resample::kBilinear;
  if (name == "bicubic") return Resample::kBicubic;
  if (name == "box") return Resample::kBox;
  return InvalidArgument("unknown resample filter '" + name + "' (expected bilinear, bicubic or box)");
}

Result<ImageDecode> ParseImageDecode(const std::string& name) {
  if (name == "auto") return ImageDecode::kAuto;
  if (name == "cpu") return ImageDecode::kCpu;
  if (name == "gpu") return ImageDecode::kGpu;
  return InvalidArgument("unknown decode '" + name + "' (expected auto, cpu or gpu)");
}

std::vector<int64_t> ImageSpec::OutputShape() const {
  if (variable) return {max_pixels * channels};
  if (chw) return {channels, height, width};
  return {height, width, channels};
}

size_t ImageSpec::OutputBytes() const {
  const size_t elem = pixel == PixelType::kFloat32 ? sizeof(float) : 1;
  if (variable) return static_cast<size_t>(max_pixels) * static_cast<size_t>(channels) * elem;
  return static_cast<size_t>(height) * static_cast<size_t>(width) * static_cast<size_t>(channels) * elem;
}

Status ImageSpec::Validate() const {
  // 16384 is libjpeg's own dimension limit (JPEG_MAX_DIMENSION is 65500, but
  // an output larger than this is a configuration mistake, not a dataset).
  if (height <= 0 || width <= 0 || height > 16384 || width > 16384) {
    return InvalidArgument("image size must be in 1..16384, got " + std::to_string(height) + "x" +
                           std::to_string(width));
  }
  if (channels != 1 && channels != 3 && channels != 4) {
    return InvalidArgument("channels must be 1, 3 or 4, got " + std::to_string(channels));
  }
  if ((channels != 3 || variable) && decode != ImageDecode::kCpu) {
    return InvalidArgument("channels other than 3 and variable-size images decode on the CPU only (decode=\"cpu\")");
  }
  if (channels == 4 && mode != ResizeMode::kNone && !variable) {
    return InvalidArgument("channels=4 takes no resize (resize=\"none\" or variable size): Pillow resizes RGBA "
                           "premultiplied, which stoker does not");
  }
  if (variable) {
    if (max_pixels <= 0 || max_pixels > (int64_t{1} << 28)) {
      return InvalidArgument("variable-size images need max_pixels in 1..2^28, got " + std::to_string(max_pixels));
    }
    if (mode != ResizeMode::kNone) return InvalidArgument("variable-size images take no resize (resize=\"none\")");
    if (pixel != PixelType::kUint8 || normalize) return InvalidArgument("variable-size images are uint8 only");
    if (random_hflip) return InvalidArgument("variable-size images take no random_hflip");
  }
  if (resize_to != 0) {
    if (mode != ResizeMode::kShorterCenterCrop) return InvalidArgument("resize_to applies to center_crop only");
    if (resize_to < std::max(height, width) || resize_to > 65500) {
      return InvalidArgument("resize_to must be >= the crop size (" + std::to_string(std::max(height, width)) +
                             "), got " + std::to_string(resize_to));
    }
    if (resample == Resample::kBox) return InvalidArgument("resize_to needs resample bilinear or bicubic");
  }
  if (mode == ResizeMode::kRandomResizedCrop) {
    if (!(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1.0f)) {
      return InvalidArgument("random_resized_crop scale must satisfy 0 < lo <= hi <= 1");
    }
    if (!(ratio[0] > 0 && ratio[0] <= ratio[1] && std::isfinite(ratio[1]))) {
      return InvalidArgument("random_resized_crop ratio must satisfy 0 < lo <= hi");
    }
  }
  if (normalize) {
    if (pixel != PixelType::kFloat32) return InvalidArgument("normalize needs pixel type float32");
    for (float s : std) {
      if (!(s > 0) || !std::isfinite(s)) return InvalidArgument("normalize std must be positive");
    }
    for (float m : mean) {
      if (!std::isfinite(m)) return InvalidArgument("normalize mean must be finite");
    }
  }
  return Status::Ok();
}

}  // namespace stoker
