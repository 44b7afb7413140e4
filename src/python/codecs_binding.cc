// python/codecs_binding.cc — single-image decode, for tests and for users who
// want stoker's decoder outside a Loader. Copies into a fresh numpy array.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include "codecs/jpeg.h"
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

}  // namespace

void RegisterCodecs(nb::module_& m) {
  m.def(
      "decode_jpeg_rgb",
      [](nb::bytes jpeg) {
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
      "jpeg"_a, "Full-size RGB decode (HWC uint8).");
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
