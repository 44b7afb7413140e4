// formats/msgpack_check.cc — see header. The format: https://github.com/msgpack/msgpack/blob/master/spec.md
#include "formats/msgpack_check.h"

#include <string>
#include <vector>

#include "formats/text_check.h"

namespace stoker {

namespace {

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

struct Open {
  uint64_t left;  // items still to read: 2 per map entry
  bool map;
};

}  // namespace

Status CheckMsgpack(std::span<const uint8_t> data) {
  const size_t size = data.size();
  const uint8_t* d = data.data();
  size_t p = 0;
  std::vector<Open> stack{{1, false}};  // the one top-level value
  auto fail = [&](size_t at, const std::string& why) {
    return DataLoss("not valid msgpack at byte " + std::to_string(at) + ": " + why);
  };
  while (!stack.empty()) {
    const size_t at = p;
    if (p >= size) return fail(at, "the data ends inside a value");
    const bool key = stack.back().map && stack.back().left % 2 == 0;
    const uint8_t b = d[p++];
    // What follows the type byte: a length field of `len_bytes`, then
    // `payload` bytes (payload from the length field when len_bytes > 0).
    int len_bytes = 0;
    uint64_t payload = 0;
    uint64_t children = 0;  // array items, or 2 x map entries
    bool is_map = false, is_str = false, is_bin = false;
    int ext_fixed = -1;  // fixext: payload size, type byte first
    if (b <= 0x7f || b >= 0xe0) {
    } else if (b <= 0x8f) {
      children = 2 * uint64_t{b & 0x0fu};
      is_map = true;
    } else if (b <= 0x9f) {
      children = b & 0x0fu;
    } else if (b <= 0xbf) {
      payload = b & 0x1fu;
      is_str = true;
    } else {
      switch (b) {
        case 0xc0: case 0xc2: case 0xc3: break;
        case 0xc1: return fail(at, "0xc1 is never used");
        case 0xc4: len_bytes = 1; is_bin = true; break;
        case 0xc5: len_bytes = 2; is_bin = true; break;
        case 0xc6: len_bytes = 4; is_bin = true; break;
        case 0xc7: len_bytes = 1; ext_fixed = 0; break;
        case 0xc8: len_bytes = 2; ext_fixed = 0; break;
        case 0xc9: len_bytes = 4; ext_fixed = 0; break;
        case 0xca: payload = 4; break;
        case 0xcb: payload = 8; break;
        case 0xcc: case 0xd0: payload = 1; break;
        case 0xcd: case 0xd1: payload = 2; break;
        case 0xce: case 0xd2: payload = 4; break;
        case 0xcf: case 0xd3: payload = 8; break;
        case 0xd4: ext_fixed = 1; break;
        case 0xd5: ext_fixed = 2; break;
        case 0xd6: ext_fixed = 4; break;
        case 0xd7: ext_fixed = 8; break;
        case 0xd8: ext_fixed = 16; break;
        case 0xd9: len_bytes = 1; is_str = true; break;
        case 0xda: len_bytes = 2; is_str = true; break;
        case 0xdb: len_bytes = 4; is_str = true; break;
        case 0xdc: len_bytes = 2; break;  // array16
        case 0xdd: len_bytes = 4; break;  // array32
        case 0xde: len_bytes = 2; is_map = true; break;
        case 0xdf: len_bytes = 4; is_map = true; break;
      }
    }
    if (len_bytes > 0) {
      if (size - p < static_cast<size_t>(len_bytes)) return fail(at, "the data ends inside a length");
      const uint64_t n = Be(d + p, len_bytes);
      p += len_bytes;
      if (b == 0xdc || b == 0xdd) {
        children = n;
      } else if (is_map) {
        children = 2 * n;
      } else {
        payload = n;
      }
    }
    if (key && !is_str && !is_bin) {
      return fail(at, "a map key is not str or bin (msgpack.unpackb's strict_map_key refuses it)");
    }
    if (ext_fixed >= 0) {  // ext: a type byte, then the data
      if (len_bytes == 0) payload = static_cast<uint64_t>(ext_fixed);
      if (size - p < 1) return fail(at, "the data ends inside an ext type");
      const int8_t type = static_cast<int8_t>(d[p++]);
      if (size - p < payload) return fail(at, "the data ends inside an ext value");
      if (type == -1) {  // a Timestamp: msgpack-python checks its size and nanoseconds
        uint64_t ns = 0;
        if (payload == 8) {
          ns = Be(d + p, 8) >> 34;
        } else if (payload == 12) {
          ns = Be(d + p, 4);
        } else if (payload != 4) {
          return fail(at, "a timestamp (ext -1) is 4, 8 or 12 bytes, not " + std::to_string(payload));
        }
        if (ns >= 1000000000) return fail(at, "a timestamp's nanoseconds are 10^9 or more");
      }
    } else if (size - p < payload) {
      return fail(at, "the data ends inside a value");
    }
    if (is_str) {
      Status utf8 = CheckUtf8(data.subspan(p, payload));
      if (!utf8.ok()) return fail(at, "a str is not UTF-8 (" + utf8.message() + ")");
    }
    p += payload;
    --stack.back().left;
    if (children > 0) {
      if (children > size - p) return fail(at, "a container claims more items than bytes follow");
      if (stack.size() > kMsgpackMaxDepth) {
        return fail(at, "nested deeper than " + std::to_string(kMsgpackMaxDepth) + " containers");
      }
      stack.push_back({children, is_map});
    }
    while (!stack.empty() && stack.back().left == 0) stack.pop_back();
  }
  if (p != size) return fail(p, std::to_string(size - p) + " bytes follow the value (msgpack's ExtraData)");
  return Status::Ok();
}

}  // namespace stoker
