// python/codecs_binding.cc — single-image decode, for tests and for users who
// want stoker's decoder outside a Loader. Returns a fresh numpy array, or, for
// decode_jpeg_rgb(out=...), decodes into the caller's array (no allocation:
// what a decode-only benchmark should measure). The GIL is released while
// decoding.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include "codecs/jpeg.h"
#include "codecs/sample_geometry.h"
#include "python/status_binding.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::python {

namespace {

std::span<const uint8_t> AsSpan(const nb::bytes& b) {
  return {reinterpret_cast<const uint8_t*>(b.c_str()), b.size()};
}

template <typename T>
nb::object NewArray(std::vector<T> data, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(data));
  nb::capsule base(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), base));
}

// One decoder per calling thread, reused: a call costs the decode, not the
// set-up of a TurboJPEG handle (benchmarks call this in tight loops).
JpegDecoder& ThreadDecoder() {
  thread_local JpegDecoder decoder;
  return decoder;
}

std::string RgbShape(const JpegInfo& info) {
  return "(" + std::to_string(info.height) + ", " + std::to_string(info.width) + ", 3)";
}

// `out` as a writable, C-contiguous, CPU uint8 array of shape (h, w, 3), or a
// ValueError naming that shape. Read-only arrays fail the cast itself.
nb::ndarray<> RgbOutArray(nb::handle out, const JpegInfo& info) {
  nb::ndarray<> arr;
  const std::string want = "out must be a writable C-contiguous uint8 numpy array of shape " + RgbShape(info);
  if (!nb::try_cast(out, arr, /*convert=*/false)) throw nb::value_error(want.c_str());
  const bool ok = arr.device_type() == nb::device::cpu::value && arr.dtype() == nb::dtype<uint8_t>() &&
                  arr.ndim() == 3 && arr.shape(0) == size_t(info.height) && arr.shape(1) == size_t(info.width) &&
                  arr.shape(2) == 3 && arr.stride(2) == 1 && arr.stride(1) == 3 &&
                  arr.stride(0) == int64_t(info.width) * 3;
  if (!ok) throw nb::value_error(want.c_str());
  return arr;
}

}  // namespace

void RegisterCodecs(nb::module_& m) {
  m.def(
      "decode_jpeg_rgb",
      [](nb::bytes jpeg, nb::object out) -> nb::object {
        if (!out.is_none()) {
          const JpegInfo info = ValueOrRaise([&] {
            nb::gil_scoped_release release;
            return ThreadDecoder().ReadInfo(AsSpan(jpeg));
          }());
          nb::ndarray<> arr = RgbOutArray(out, info);
          std::span<uint8_t> dst(static_cast<uint8_t*>(arr.data()), arr.size());
          int w = 0, h = 0;
          Status st;
          {
            nb::gil_scoped_release release;
            st = ThreadDecoder().DecodeRgbInto(AsSpan(jpeg), dst, &w, &h);
          }
          OkOrRaise(st);
          return out;
        }
        std::vector<uint8_t> rgb;
        int w = 0, h = 0;
        Status st;
        {
          nb::gil_scoped_release release;
          st = ThreadDecoder().DecodeRgb(AsSpan(jpeg), &rgb, &w, &h);
        }
        OkOrRaise(st);
        return NewArray(std::move(rgb), {size_t(h), size_t(w), 3});
      },
      "jpeg"_a, "out"_a = nb::none(),
      "Full-size RGB decode (HWC uint8). With out= (a C-contiguous uint8 array of shape (h, w, 3)), "
      "decodes into it and returns it; a wrong shape or dtype raises ValueError.");
  m.def(
      "plan_sample",
      [](const ImageSpec& spec, int width, int height, uint64_t seed) {
        OkOrRaise(spec.Validate());
        const SampleGeometry g = ValueOrRaise(PlanSample(spec, width, height, seed));
        nb::dict d;
        d["crop"] = nb::make_tuple(g.crop_x, g.crop_y, g.crop_w, g.crop_h);
        d["resized"] = nb::make_tuple(g.resized_w, g.resized_h);
        d["window"] = nb::make_tuple(g.win_x, g.win_y, g.win_w, g.win_h);
        d["hflip"] = g.hflip;
        return d;
      },
      "spec"_a, "width"_a, "height"_a, "seed"_a = 0,
      "Where sample `seed` of a width x height image comes from (for tests): crop (x, y, w, h) of the "
      "source, the size it is resized to, the output window (x, y, w, h) of the resized image, the flip.");
  m.def(
      "decode_jpeg",
      [](nb::bytes jpeg, const ImageSpec& spec, uint64_t seed) -> nb::object {
        OkOrRaise(spec.Validate());
        std::vector<int64_t> shape64 = spec.OutputShape();
        std::vector<size_t> shape(shape64.begin(), shape64.end());
        std::vector<uint8_t> out(spec.OutputBytes());
        Status st;
        {
          nb::gil_scoped_release release;
          st = ThreadDecoder().DecodeInto(AsSpan(jpeg), spec, seed, out);
        }
        OkOrRaise(st);
        if (spec.pixel == PixelType::kUint8) return NewArray(std::move(out), shape);
        std::vector<float> f(out.size() / sizeof(float));
        std::memcpy(f.data(), out.data(), out.size());
        return NewArray(std::move(f), shape);
      },
      "jpeg"_a, "spec"_a, "seed"_a = 0, "Decode and transform one JPEG as a Loader field would.");
}

}  // namespace stoker::python
