// tests/fuzz/zip_fuzz.cc — the ZIP central directory (zip64 included), stored
// and deflated extraction with CRC checks, on any bytes (the .npz container).
#include <cstdint>
#include <span>
#include <vector>

#include "formats/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> zip(data, size);
  stoker::Result<std::vector<stoker::ZipEntry>> entries = stoker::ListZip(zip);
  if (!entries.ok()) return 0;
  std::vector<uint8_t> out;
  for (const stoker::ZipEntry& e : *entries) {
    if (e.method == 0) {
      stoker::Result<std::span<const uint8_t>> stored = stoker::StoredZipEntryData(zip, e);
      if (stored.ok() && (stored->data() < data || stored->data() + stored->size() > data + size)) __builtin_trap();
    }
    // The caller sizes the output from the directory; keep the fuzzer's memory
    // bounded (the loader bounds it by the layout's expected array size).
    if (e.uncompressed_size > (16u << 20)) continue;
    out.resize(e.uncompressed_size);
    (void)stoker::ExtractZipEntry(zip, e, out);
  }
  return 0;
}
