#include "python/array_binding.h"

namespace nb = nanobind;

namespace stoker::python {

nb::dlpack::dtype ToDlpack(DType dtype) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (dtype) {
    case DType::kBool: return make(C::Bool, 8);
    case DType::kU8: return make(C::UInt, 8);
    case DType::kI8: return make(C::Int, 8);
    case DType::kU16: return make(C::UInt, 16);
    case DType::kI16: return make(C::Int, 16);
    case DType::kU32: return make(C::UInt, 32);
    case DType::kI32: return make(C::Int, 32);
    case DType::kU64: return make(C::UInt, 64);
    case DType::kI64: return make(C::Int, 64);
    case DType::kF16: return make(C::Float, 16);
    case DType::kF32: return make(C::Float, 32);
    case DType::kF64: return make(C::Float, 64);
    case DType::kC64: return make(C::Complex, 64);
    case DType::kC128: return make(C::Complex, 128);
  }
  return make(C::UInt, 8);
}

nb::object ArrayView(const stoker::ArrayView& view, std::shared_ptr<void> owner) {
  auto* holder = new std::shared_ptr<void>(std::move(owner));
  nb::capsule base(holder, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<size_t> shape(view.shape.begin(), view.shape.end());
  if (view.device >= 0) {  // device memory: a torch CUDA tensor through DLPack (numpy cannot hold it)
    nb::ndarray<nb::pytorch> array(view.data, shape.size(), shape.data(), base, nullptr, ToDlpack(view.dtype),
                                   nb::device::cuda::value, view.device);
    return nb::cast(array, nb::rv_policy::reference);
  }
  nb::ndarray<nb::numpy> array(view.data, shape.size(), shape.data(), base, nullptr, ToDlpack(view.dtype));
  return nb::cast(array, nb::rv_policy::reference);
}

}  // namespace stoker::python
