// tests/fuzz/msgpack_check_fuzz.cc — the msgpack field check
// (formats/msgpack_check.h) on any bytes, against a recursive-descent reference
// written here from the msgpack spec and msgpack-python's unpackb defaults
// (raw=False: str is UTF-8; strict_map_key: keys str or bin; ext -1 a
// Timestamp of 4, 8 or 12 bytes with nanoseconds < 10^9), with the same depth
// bound: the same verdict on every input, and an accepted input is one value
// using every byte.
#include <cstdint>
#include <cstdio>
#include <span>

#include "formats/msgpack_check.h"
#include "formats/text_check.h"

namespace {

class Reference {
 public:
  explicit Reference(std::span<const uint8_t> d) : d_(d) {}

  bool Valid() { return Value(0, false) && i_ == d_.size(); }

 private:
  bool Take(uint64_t n, uint64_t* v) {  // a big-endian n-byte integer
    if (d_.size() - i_ < n) return false;
    *v = 0;
    for (uint64_t k = 0; k < n; ++k) *v = *v << 8 | d_[i_++];
    return true;
  }
  bool Skip(uint64_t n) {
    if (d_.size() - i_ < n) return false;
    i_ += n;
    return true;
  }
  bool Str(uint64_t n) {
    if (d_.size() - i_ < n) return false;
    const bool ok = stoker::CheckUtf8(d_.subspan(i_, n)).ok();
    i_ += n;
    return ok;
  }
  bool Ext(uint64_t n) {
    uint64_t type = 0;
    if (!Take(1, &type)) return false;
    if (d_.size() - i_ < n) return false;
    if (type == 0xff) {  // -1: a Timestamp
      uint64_t ns = 0, word = 0;
      const size_t at = i_;
      if (n == 8) {
        Take(8, &word);
        ns = word >> 34;
      } else if (n == 12) {
        Take(4, &ns);
      } else if (n != 4) {
        return false;
      }
      i_ = at;
      if (ns >= 1000000000) return false;
    }
    return Skip(n);
  }
  bool Items(uint64_t n, int depth, bool map) {
    if (depth + 1 > stoker::kMsgpackMaxDepth) return n == 0;
    for (uint64_t k = 0; k < n; ++k) {
      if (map && !Value(depth + 1, true)) return false;
      if (!Value(depth + 1, false)) return false;
    }
    return true;
  }
  bool Value(int depth, bool key) {
    uint64_t n = 0;
    if (i_ >= d_.size()) return false;
    const uint8_t b = d_[i_++];
    const bool is_str = (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb);
    const bool is_bin = b >= 0xc4 && b <= 0xc6;
    if (key && !is_str && !is_bin) return false;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return true;
    if (b <= 0x8f) return Items(b & 0x0f, depth, true);
    if (b <= 0x9f) return Items(b & 0x0f, depth, false);
    if (b <= 0xbf) return Str(b & 0x1f);
    switch (b) {
      case 0xc4: return Take(1, &n) && Skip(n);
      case 0xc5: return Take(2, &n) && Skip(n);
      case 0xc6: return Take(4, &n) && Skip(n);
      case 0xc7: return Take(1, &n) && Ext(n);
      case 0xc8: return Take(2, &n) && Ext(n);
      case 0xc9: return Take(4, &n) && Ext(n);
      case 0xca: return Skip(4);
      case 0xcb: return Skip(8);
      case 0xcc: case 0xd0: return Skip(1);
      case 0xcd: case 0xd1: return Skip(2);
      case 0xce: case 0xd2: return Skip(4);
      case 0xcf: case 0xd3: return Skip(8);
      case 0xd4: return Ext(1);
      case 0xd5: return Ext(2);
      case 0xd6: return Ext(4);
      case 0xd7: return Ext(8);
      case 0xd8: return Ext(16);
      case 0xd9: return Take(1, &n) && Str(n);
      case 0xda: return Take(2, &n) && Str(n);
      case 0xdb: return Take(4, &n) && Str(n);
      case 0xdc: return Take(2, &n) && Items(n, depth, false);
      case 0xdd: return Take(4, &n) && Items(n, depth, false);
      case 0xde: return Take(2, &n) && Items(n, depth, true);
      case 0xdf: return Take(4, &n) && Items(n, depth, true);
      default: return false;  // 0xc1
    }
  }

  std::span<const uint8_t> d_;
  size_t i_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  const bool want = Reference(bytes).Valid();
  const stoker::Status got = stoker::CheckMsgpack(bytes);
  if (got.ok() != want) {
    fprintf(stderr, "CheckMsgpack: %s; the reference: %s\n", got.ToString().c_str(), want ? "valid" : "invalid");
    __builtin_trap();
  }
  return 0;
}
