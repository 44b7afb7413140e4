// stoker/image_spec.h — what an image field turns into: output geometry,
// augmentation and element type. A value; the pipeline shares one per field.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

enum class ResizeMode : uint8_t {
  kNone,              // full decode, no resize: every image must be height x width
  kStretch,           // resize to height x width ignoring aspect
  kShorterCenterCrop, // torchvision Resize(S) then CenterCrop(height, width) (ImageNet eval)
  kLongestPad,        // longer side to max(height,width), pad bottom/right with 0 (SAM)
  kRandomResizedCrop, // torchvision RandomResizedCrop(scale, ratio), then resize
};
Result<ResizeMode> ParseResizeMode(const std::string& name);  // "none","stretch","center_crop","longest","random_resized_crop"

enum class PixelType : uint8_t { kUint8, kFloat32 };

// Where an image field's JPEGs decode (pipeline/gpu_decode.h). kAuto: on the
// GPU and the CPU at once, split by measured rates, when the loader's device
// is CUDA; on the CPU otherwise. kGpu: every JPEG the GPU decoder takes (the
// rest, and PNG/WebP, on the CPU). kCpu: the CPU decoders only, the default
// until GPU decode has fed a whole training run on a GPU (issue 26: the
// bench's ResNet-18 part did not finish there).
enum class ImageDecode : uint8_t { kAuto, kCpu, kGpu };
Result<ImageDecode> ParseImageDecode(const std::string& name);  // "auto","cpu","gpu"

// The resize filter. kBilinear/kBicubic are Pillow's antialiased BILINEAR /
// BICUBIC (what torchvision's transforms run on PIL images) with torchvision's
// geometry; kBox is the older libyuv box-filter fast path (approximate
// geometry: the crop is taken in the source, then resized).
enum class Resample : uint8_t { kBilinear, kBicubic, kBox };
Result<Resample> ParseResample(const std::string& name);  // "bilinear","bicubic","box"

struct ImageSpec {
  int height = 224;
  int width = 224;
  ResizeMode mode = ResizeMode::kShorterCenterCrop;
  bool chw = true;                 // CHW (torch) or HWC
  bool random_hflip = false;       // p = 0.5, decided per sample from its seed
  std::array<float, 2> scale{0.08f, 1.0f};          // random_resized_crop
  std::array<float, 2> ratio{3.0f / 4, 4.0f / 3};   // random_resized_crop
  Resample resample = Resample::kBilinear;
  // center_crop only: torchvision's Resize(resize_to) before CenterCrop(height,
  // width), e.g. 256 for the ImageNet eval recipe Resize(256)+CenterCrop(224).
  // 0: the smallest S for which Resize(S) covers the output (S = size when square).
  int resize_to = 0;
  PixelType pixel = PixelType::kUint8;
  bool normalize = false;          // float32 only: (x/255 - mean) / std
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  ImageDecode decode = ImageDecode::kCpu;
  // 1, 3 or 4: Pillow's convert("L"), ("RGB") or ("RGBA") (codecs/image_channels.h).
  // 4 takes no resize (mode kNone, or variable); neither 1 nor 4 decodes on the GPU.
  int channels = 3;
  // Variable size: each image as stored, no resize, at most max_pixels pixels,
  // written to a [max_pixels * channels] uint8 slot (CHW or HWC from its start)
  // with its own shape in "<field>.shape" [3] int64; Python gets a list of arrays.
  bool variable = false;
  int64_t max_pixels = 0;

  // Shape of one output sample: {C,H,W} or {H,W,C}; variable: {max_pixels * C}.
  std::vector<int64_t> OutputShape() const;
  size_t OutputBytes() const;
  Status Validate() const;
};

}  // namespace stoker
