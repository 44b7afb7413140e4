// formats/npy.h — NumPy's .npy format (versions 1.0, 2.0, 3.0).
//
// Every numeric dtype numpy writes for plain arrays: bool, (u)int8..64,
// float16/32/64, complex64/128, in either byte order, C or Fortran order.
// Reading yields native byte order, C order, so a batch slot holds exactly what
// `np.load(f)` would return (after np.ascontiguousarray).
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stoker/dtype.h"
#include "stoker/status.h"

namespace stoker {


struct ArrayInfo {
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  bool fortran_order = false;
  bool byte_swapped = false;  // stored in the non-native byte order
  size_t data_offset = 0;     // where the data starts in the .npy bytes
  size_t num_elements() const;
  size_t nbytes() const { return num_elements() * DTypeSize(dtype); }
};

// Parses the magic, version and header dict. Checks that the data that the
// header promises is all there. Messages say what is wrong with the header.
Result<ArrayInfo> ParseNpyHeader(std::span<const uint8_t> npy);

// Copies the array into out (info.nbytes() bytes) in native byte order and C
// order, transposing Fortran-order data.
Status CopyNpyData(const ArrayInfo& info, std::span<const uint8_t> npy, std::span<uint8_t> out);

// True when the stored data bytes are already the output bytes (native byte
// order, and C order or at most one axis longer than 1): CopyNpyData is then a
// plain copy, so the data can be read straight to its destination.
bool IsPlainNpyData(const ArrayInfo& info);

// Encodes a C-order native-byte-order array as .npy version 1.0.
std::vector<uint8_t> EncodeNpy(DType dtype, const std::vector<int64_t>& shape, std::span<const uint8_t> data);

}  // namespace stoker
