// tests/fuzz/png_fast_fuzz.cc — the libdeflate PNG path (codecs/png_fast.h:
// its own chunk walk, zlib inflate of the joined IDATs, SSE2 Paeth) against
// libspng as the reference, on any bytes.
//
// DecodePngRgb (codecs/png.cc) tries the fast path first and gives libspng
// every PNG it declines, so a PNG the fast path declines decodes exactly as
// libspng decodes it, by construction. What remains to check is the other
// way: whatever the fast path accepts, libspng (with png.cc's settings: a bad
// ancillary CRC skipped, 64 MiB chunk limits) must accept too, with the same
// width, height and pixels. A PNG libspng refuses must not be decoded by the
// fast path into some picture: both refuse.
//
// The reference is DecodePngRgb itself with STOKER_PNG_DECODER=spng (set
// before its first call), so it is the fallback exactly as the loader runs it.
//
// Each input is tried three ways, since a mutation inside a critical chunk
// breaks its CRC and both decoders then stop at once:
//  1. as it is;
//  2. with every chunk's CRC made right (when one was wrong), so mutated
//     headers, palettes and zlib streams reach the decoders;
//  3. as the filtered scanlines of a PNG written here with zlib (not
//     libdeflate, the fast path's inflater): the first two bytes pick the
//     colour type and width, each row's first byte is its filter type (mod 5
//     unless the first byte's bit 2 is set, which keeps bad filter types),
//     so the unfilter loops and the SSE2 Paeth see arbitrary rows.
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include <zlib.h>

#include "codecs/png.h"
#include "codecs/png_fast.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("STOKER_PNG_DECODER", "spng", 1);  // DecodePngRgb reads it once, at its first call
  return 0;
}

namespace {

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void PutBe32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<uint8_t>(v >> shift));
}
void PutChunk(std::vector<uint8_t>& out, const char* type, const uint8_t* data, size_t n) {
  PutBe32(out, static_cast<uint32_t>(n));
  const size_t at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data, data + n);
  PutBe32(out, static_cast<uint32_t>(crc32(0, out.data() + at, static_cast<uInt>(n + 4))));
}

// The differential check on one PNG.
void Check(std::span<const uint8_t> png) {
  // Bound the work per input: a 50-byte file may claim 2^28 pixels, and both
  // decoders size their buffers from the header before they inflate.
  if (png.size() >= 24 && uint64_t{Be32(&png[16])} * Be32(&png[20]) > (uint64_t{1} << 20)) return;
  static std::vector<uint8_t>* fast_rgb = new std::vector<uint8_t>();  // reused, as a decode thread does
  static std::vector<uint8_t>* ref_rgb = new std::vector<uint8_t>();
  int fw = -1, fh = -1;
  if (!stoker::DecodePngRgbFast(png, *fast_rgb, &fw, &fh)) return;  // libspng decides: nothing to compare
  if (fw <= 0 || fh <= 0 || fast_rgb->size() != size_t{3} * static_cast<size_t>(fw) * static_cast<size_t>(fh)) {
    __builtin_trap();  // the fast path's own promise: width * height * 3 bytes
  }
  int rw = -1, rh = -1;
  const stoker::Status ref = stoker::DecodePngRgb(png, *ref_rgb, &rw, &rh);
  if (!ref.ok()) {
    fprintf(stderr, "png_fast decoded %dx%d, libspng refused: %s\n", fw, fh, ref.ToString().c_str());
    __builtin_trap();
  }
  if (rw != fw || rh != fh) {
    fprintf(stderr, "png_fast decoded %dx%d, libspng %dx%d\n", fw, fh, rw, rh);
    __builtin_trap();
  }
  if (std::memcmp(fast_rgb->data(), ref_rgb->data(), fast_rgb->size()) != 0) {
    size_t i = 0;
    while ((*fast_rgb)[i] == (*ref_rgb)[i]) ++i;
    fprintf(stderr, "png_fast and libspng differ at byte %zu (pixel %zu): %u vs %u\n", i, i / 3, (*fast_rgb)[i],
            (*ref_rgb)[i]);
    __builtin_trap();
  }
}

// The input with each chunk's CRC recomputed; empty when none was wrong (or
// it is not a PNG).
std::vector<uint8_t> WithRightCrcs(std::span<const uint8_t> in) {
  static constexpr uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (in.size() < 8 || std::memcmp(in.data(), kSig, 8) != 0) return {};
  std::vector<uint8_t> out(in.begin(), in.end());
  bool changed = false;
  for (size_t off = 8; off + 12 <= out.size();) {
    const uint32_t len = Be32(&out[off]);
    if (len > out.size() - off - 12) break;
    const uint32_t crc = static_cast<uint32_t>(crc32(0, &out[off + 4], len + 4));
    if (Be32(&out[off + 8 + len]) != crc) {
      changed = true;
      for (int k = 0; k < 4; ++k) out[off + 8 + len + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
    }
    off += 12 + size_t{len};
  }
  return changed ? out : std::vector<uint8_t>{};
}

// A PNG whose filtered scanlines are the input (after two bytes of settings).
std::vector<uint8_t> FromScanlines(std::span<const uint8_t> in) {
  if (in.size() < 3) return {};
  static constexpr int kTypes[4] = {0, 2, 3, 6};
  const int ctype = kTypes[in[0] & 3];
  const bool keep_bad_filters = in[0] & 4;
  const size_t bpp = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : 4;
  const size_t w = 1 + in[1] % 64;
  const size_t row = w * bpp + 1;
  std::vector<uint8_t> lines(in.begin() + 2, in.end());
  const size_t h = lines.size() / row;
  if (h == 0) return {};
  lines.resize(h * row);
  if (!keep_bad_filters) {
    for (size_t y = 0; y < h; ++y) lines[y * row] %= 5;
  }
  std::vector<uint8_t> z(compressBound(static_cast<uLong>(lines.size())));
  uLongf zn = z.size();
  if (compress2(z.data(), &zn, lines.data(), static_cast<uLong>(lines.size()), 1) != Z_OK) __builtin_trap();
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  PutBe32(ihdr, static_cast<uint32_t>(w));
  PutBe32(ihdr, static_cast<uint32_t>(h));
  ihdr.insert(ihdr.end(), {8, static_cast<uint8_t>(ctype), 0, 0, 0});
  PutChunk(png, "IHDR", ihdr.data(), ihdr.size());
  if (ctype == 3) {  // all 256 entries: every index is in range
    uint8_t plte[768];
    for (int i = 0; i < 768; ++i) plte[i] = static_cast<uint8_t>(i * 37 + 11);
    PutChunk(png, "PLTE", plte, sizeof plte);
  }
  PutChunk(png, "IDAT", z.data(), zn);
  PutChunk(png, "IEND", nullptr, 0);
  return png;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  Check(in);
  if (std::vector<uint8_t> fixed = WithRightCrcs(in); !fixed.empty()) Check(fixed);
  if (std::vector<uint8_t> made = FromScanlines(in); !made.empty()) Check(made);
  return 0;
}
