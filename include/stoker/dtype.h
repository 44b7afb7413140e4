// stoker/dtype.h — element types of the arrays stoker produces, named as
// numpy names them. (Implemented with the NPY format in src/formats/npy.cc.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stoker/status.h"

namespace stoker {

enum class DType : uint8_t { kBool, kU8, kI8, kU16, kI16, kU32, kI32, kU64, kI64, kF16, kF32, kF64, kC64, kC128 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);        // numpy's name: "float32", "uint8", ...
Result<DType> ParseDTypeName(std::string_view name);  // the inverse

}  // namespace stoker
