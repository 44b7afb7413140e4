// tests/fuzz/npy_fuzz.cc — the .npy header parser and the copy (byte swap,
// Fortran transpose) on any bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> npy(data, size);
  stoker::Result<stoker::ArrayInfo> info = stoker::ParseNpyHeader(npy);
  if (!info.ok()) return 0;
  // The parser promised that the data is all there.
  if (info->data_offset > size || info->nbytes() > size - info->data_offset) __builtin_trap();
  std::vector<uint8_t> out(info->nbytes());
  (void)stoker::CopyNpyData(*info, npy, out);
  return 0;
}
