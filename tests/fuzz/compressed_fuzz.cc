// tests/fuzz/compressed_fuzz.cc — the gzip and zstd readers (io/gzip_reader.h,
// io/zstd_reader.h) on any bytes: building the restart table over a damaged
// stream must not crash, and what it accepts must read back the same whether
// read whole or from restart points in pieces; then the tar scan over the
// decompressed bytes.
#include <cstdint>
#include <cstring>
#include <vector>

#include "formats/tar.h"
#include "fuzz_input.h"
#include "io/gzip_reader.h"
#include "io/posix_reader.h"
#include "io/zstd_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool gz = stoker::IsGzipMagic(data, size), zst = stoker::IsZstdMagic(data, size);
  if (!gz && !zst) return 0;
  stoker::fuzz::MemFile mem(data, size);
  auto raw = stoker::PosixReader::Open(mem.path());
  if (!raw.ok()) return 0;
  auto reader = gz ? stoker::OpenGzipReader(std::move(raw).value(), /*span=*/4096)
                   : stoker::OpenZstdReader(std::move(raw).value());
  if (!reader.ok()) return 0;
  const stoker::RandomAccessReader& r = **reader;
  const uint64_t n = r.Size();
  if (n > (64u << 20)) return 0;  // a bomb: the table pass alone was the test
  std::vector<uint8_t> whole(n), piece;
  if (!r.PRead(0, whole).ok()) __builtin_trap();  // Size() bytes decoded once must decode again
  for (uint64_t off = n / 3; off < n; off += 5000) {  // from access points, out of order
    piece.resize(std::min<uint64_t>(3000, n - off));
    if (!r.PRead(off, piece).ok() || std::memcmp(piece.data(), whole.data() + off, piece.size()) != 0) {
      __builtin_trap();
    }
  }
  (void)stoker::ScanTar(r, n);
  return 0;
}
