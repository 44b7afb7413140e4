// formats/npy.cc — .npy header parsing, conversion to native C order, encoding.
//
// The header is a Python dict literal; only the subset numpy writes for plain
// arrays is accepted, so anything else (structured or object dtypes, strings,
// datetimes) fails with a message saying so rather than decoding wrongly.
// Thread-safety: free functions keep no state.
#include "formats/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>

namespace stoker {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // numpy aligns the data start to 64 bytes

struct DTypeInfo {
  DType dtype;
  const char* name;
  char kind;  // numpy's kind code in a descr: b, u, i, f, c
  uint8_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "bool", 'b', 1},       {DType::kU8, "uint8", 'u', 1},         {DType::kI8, "int8", 'i', 1},
    {DType::kU16, "uint16", 'u', 2},      {DType::kI16, "int16", 'i', 2},        {DType::kU32, "uint32", 'u', 4},
    {DType::kI32, "int32", 'i', 4},       {DType::kU64, "uint64", 'u', 8},       {DType::kI64, "int64", 'i', 8},
    {DType::kF16, "float16", 'f', 2},     {DType::kF32, "float32", 'f', 4},      {DType::kF64, "float64", 'f', 8},
    {DType::kC64, "complex64", 'c', 8},   {DType::kC128, "complex128", 'c', 16},
};

const DTypeInfo& Info(DType d) { return kDTypes[static_cast<size_t>(d)]; }

Status Bad(const std::string& why) { return DataLoss("npy header: " + why); }

// A cursor over the header's dict literal.
struct Lexer {
  std::string_view s;
  size_t i = 0;
  void Ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool Eat(char c) {
    Ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool Word(std::string_view w) {
    Ws();
    if (s.substr(i, w.size()) != w) return false;
    i += w.size();
    return true;
  }
  bool String(std::string* out) {
    Ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string_view::npos) return false;
    *out = std::string(s.substr(i, end - i));
    i = end + 1;
    return true;
  }
  bool Int(int64_t* out) {
    Ws();
    size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (s[i++] - '0');
    }
    if (i == start) return false;
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 longs in old files
    *out = v;
    return true;
  }
};

Status ParseDescr(std::string_view descr, ArrayInfo* info) {
  std::string quoted = "'" + std::string(descr) + "'";
  if (descr.empty()) return Bad("empty descr");
  char order = descr[0];
  if (order == '<' || order == '>' || order == '|' || order == '=') {
    descr.remove_prefix(1);
  } else {
    order = '=';
  }
  if (descr.empty()) return Bad("descr " + quoted + " has no type");
  char kind = descr[0];
  if (kind == 'O') {
    return InvalidArgument("npy: object arrays (descr " + quoted + ") hold pickled Python objects; not supported");
  }
  if (kind == 'V') return InvalidArgument("npy: structured/void dtype " + quoted + " is not supported");
  int size = 0;
  for (char c : descr.substr(1)) {
    if (c < '0' || c > '9' || size > 1000) return InvalidArgument("npy: unsupported dtype " + quoted);
    size = size * 10 + (c - '0');
  }
  for (const DTypeInfo& d : kDTypes) {
    if (d.kind == kind && d.size == size) {
      info->dtype = d.dtype;
      const bool little = std::endian::native == std::endian::little;
      info->byte_swapped = size > 1 && ((order == '<' && !little) || (order == '>' && little));
      return Status::Ok();
    }
  }
  return InvalidArgument("npy: unsupported dtype " + quoted +
                         " (supported: bool, (u)int8-64, float16/32/64, complex64/128)");
}

template <size_t N>
inline void SwapBytes(uint8_t* p) {
  std::reverse(p, p + N);
}

// Copies n elements of size ES from src (element stride `stride` bytes) to
// contiguous dst, reversing each `Unit`-byte word when swapping.
template <size_t ES, size_t Unit>
void CopyStrided(const uint8_t* src, size_t stride, uint8_t* dst, size_t n, bool swap) {
  for (size_t k = 0; k < n; ++k, src += stride, dst += ES) {
    std::memcpy(dst, src, ES);
    if (swap) {
      for (size_t u = 0; u < ES; u += Unit) SwapBytes<Unit>(dst + u);
    }
  }
}

using CopyFn = void (*)(const uint8_t*, size_t, uint8_t*, size_t, bool);

CopyFn CopyFor(DType d) {
  switch (DTypeSize(d)) {
    case 1: return CopyStrided<1, 1>;
    case 2: return CopyStrided<2, 2>;
    case 4: return CopyStrided<4, 4>;
    case 8: return d == DType::kC64 ? CopyStrided<8, 4> : CopyStrided<8, 8>;
    default: return CopyStrided<16, 8>;  // complex128: two float64
  }
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }
const char* DTypeName(DType dtype) { return Info(dtype).name; }

Result<DType> ParseDTypeName(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

size_t ArrayInfo::num_elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

Result<ArrayInfo> ParseNpyHeader(std::span<const uint8_t> npy) {
  if (npy.size() < 10 || std::memcmp(npy.data(), kMagic, kMagicLen) != 0) return Bad("not an .npy file (bad magic)");
  const uint8_t major = npy[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = npy[8] | (size_t{npy[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (npy.size() < 12) return Bad("truncated");
    header_len = npy[8] | (size_t{npy[9]} << 8) | (size_t{npy[10]} << 16) | (size_t{npy[11]} << 24);
    header_start = 12;
  } else {
    return Bad("unsupported format version " + std::to_string(major) + "." + std::to_string(npy[7]));
  }
  if (header_len > npy.size() - header_start) {
    return Bad("header of " + std::to_string(header_len) + " bytes but only " +
               std::to_string(npy.size() - header_start) + " follow");
  }

  ArrayInfo info;
  info.data_offset = header_start + header_len;
  Lexer lx{{reinterpret_cast<const char*>(npy.data() + header_start), header_len}};
  bool have_descr = false, have_order = false, have_shape = false;
  if (!lx.Eat('{')) return Bad("expected a dict");
  while (!lx.Eat('}')) {
    std::string key;
    if (!lx.String(&key) || !lx.Eat(':')) return Bad("malformed dict");
    if (key == "descr") {
      lx.Ws();
      if (lx.i < lx.s.size() && lx.s[lx.i] == '[') {
        return InvalidArgument("npy: structured dtypes (record arrays) are not supported");
      }
      std::string descr;
      if (!lx.String(&descr)) return Bad("descr is not a string");
      STOKER_RETURN_IF_ERROR(ParseDescr(descr, &info));
      have_descr = true;
    } else if (key == "fortran_order") {
      if (lx.Word("True")) {
        info.fortran_order = true;
      } else if (!lx.Word("False")) {
        return Bad("fortran_order is not True or False");
      }
      have_order = true;
    } else if (key == "shape") {
      if (!lx.Eat('(')) return Bad("shape is not a tuple");
      while (!lx.Eat(')')) {  // "()", "(3,)", "(3, 4)", "(3, 4,)"
        int64_t d;
        if (!lx.Int(&d)) return Bad("shape holds a non-integer");
        info.shape.push_back(d);
        if (lx.Eat(')')) break;
        if (!lx.Eat(',')) return Bad("malformed shape");
      }
      have_shape = true;
    } else {
      return Bad("unexpected key '" + key + "'");
    }
    if (!lx.Eat(',')) {
      if (!lx.Eat('}')) return Bad("malformed dict");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) return Bad("missing one of descr, fortran_order, shape");

  size_t nbytes = DTypeSize(info.dtype);
  for (int64_t d : info.shape) {
    if (__builtin_mul_overflow(nbytes, static_cast<size_t>(d), &nbytes)) return Bad("shape too large");
  }
  if (nbytes > npy.size() - info.data_offset) {
    return DataLoss("npy: truncated: header promises " + std::to_string(nbytes) + " bytes of data, " +
                    std::to_string(npy.size() - info.data_offset) + " present");
  }
  return info;
}

bool IsPlainNpyData(const ArrayInfo& info) {
  if (info.byte_swapped && DTypeSize(info.dtype) > 1) return false;
  return !info.fortran_order || std::count_if(info.shape.begin(), info.shape.end(), [](int64_t d) { return d > 1; }) <= 1;
}

Status CopyNpyData(const ArrayInfo& info, std::span<const uint8_t> npy, std::span<uint8_t> out) {
  const size_t nbytes = info.nbytes();
  if (out.size() != nbytes) {
    return InvalidArgument("npy: output holds " + std::to_string(out.size()) + " bytes, array needs " +
                           std::to_string(nbytes));
  }
  if (info.data_offset > npy.size() || nbytes > npy.size() - info.data_offset) return DataLoss("npy: truncated data");
  if (nbytes == 0) return Status::Ok();
  const uint8_t* src = npy.data() + info.data_offset;
  const size_t es = DTypeSize(info.dtype);

  // Fortran and C order coincide when at most one axis is longer than 1.
  const size_t long_axes = std::count_if(info.shape.begin(), info.shape.end(), [](int64_t d) { return d > 1; });
  if (!info.fortran_order || long_axes <= 1) {
    if (info.byte_swapped) {
      CopyFor(info.dtype)(src, es, out.data(), nbytes / es, true);
    } else {
      std::memcpy(out.data(), src, nbytes);
    }
    return Status::Ok();
  }

  // Walk the C-order output; each output row (the last axis) is a strided run
  // of the Fortran-order input, whose stride on axis k is the product of the
  // extents before it.
  const size_t nd = info.shape.size();
  std::vector<size_t> stride(nd), idx(nd, 0);
  for (size_t k = 0, s = es; k < nd; ++k) {
    stride[k] = s;
    s *= static_cast<size_t>(info.shape[k]);
  }
  const size_t row = static_cast<size_t>(info.shape[nd - 1]);
  const size_t rows = nbytes / es / row;
  CopyFn copy = CopyFor(info.dtype);
  uint8_t* dst = out.data();
  size_t base = 0;  // input byte offset of idx (with idx[nd-1] == 0)
  for (size_t r = 0; r < rows; ++r, dst += row * es) {
    copy(src + base, stride[nd - 1], dst, row, info.byte_swapped);
    for (size_t k = nd - 1; k-- > 0;) {  // odometer over the leading axes
      if (++idx[k] < static_cast<size_t>(info.shape[k])) {
        base += stride[k];
        break;
      }
      base -= stride[k] * (idx[k] - 1);
      idx[k] = 0;
    }
  }
  return Status::Ok();
}

std::vector<uint8_t> EncodeNpy(DType dtype, const std::vector<int64_t>& shape, std::span<const uint8_t> data) {
  const DTypeInfo& d = Info(dtype);
  const char order = d.size == 1 ? '|' : (std::endian::native == std::endian::little ? '<' : '>');
  std::string dict = "{'descr': '";
  dict += order;
  dict += d.kind;
  dict += std::to_string(d.size) + "', 'fortran_order': False, 'shape': (";
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k) dict += ", ";
    dict += std::to_string(shape[k]);
  }
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned, as
  // numpy does; version 2.0 only when the header outgrows 16 bits.
  const bool v2 = dict.size() + 1 + kAlign > 0xffff;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');

  const size_t hl = dict.size();
  std::vector<uint8_t> out(total + data.size());
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, kMagicLen);
  p[6] = v2 ? 2 : 1;
  p[7] = 0;
  for (size_t k = 0; k < prefix - 8; ++k) p[8 + k] = static_cast<uint8_t>(hl >> (8 * k));
  std::memcpy(p + prefix, dict.data(), hl);
  if (!data.empty()) std::memcpy(p + total, data.data(), data.size());
  return out;
}

}  // namespace stoker
