// Tests for formats/npy: hand-encoded headers (big-endian, Fortran order,
// versions 1-3) checked value by value, rejections, and the encoder's layout.
#include "formats/npy.h"

#include <gtest/gtest.h>

#include <bit>
#include <complex>
#include <cstring>

namespace stoker {
namespace {

// An .npy file built by hand: magic, version, little-endian header length, the
// dict text (newline-terminated, unpadded: readers must not rely on padding).
std::vector<uint8_t> Npy(int major, const std::string& dict, const std::vector<uint8_t>& data) {
  std::string h = dict + "\n";
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  const size_t len_bytes = major == 1 ? 2 : 4;
  for (size_t k = 0; k < len_bytes; ++k) out.push_back(static_cast<uint8_t>(h.size() >> (8 * k)));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void PutBE(std::vector<uint8_t>& out, uint64_t v, size_t n) {
  for (size_t k = n; k-- > 0;) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
}
void PutLE(std::vector<uint8_t>& out, uint64_t v, size_t n) {
  for (size_t k = 0; k < n; ++k) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
}

template <typename T>
std::vector<T> Decode(const std::vector<uint8_t>& npy, ArrayInfo* info_out = nullptr) {
  auto info = ParseNpyHeader(npy);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return {};
  EXPECT_EQ(info->nbytes() % sizeof(T), 0u);
  std::vector<T> out(info->nbytes() / sizeof(T));
  Status s = CopyNpyData(*info, npy, {reinterpret_cast<uint8_t*>(out.data()), info->nbytes()});
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (info_out) *info_out = *info;
  return out;
}

TEST(NpyTest, ReadsBigEndianIntegersAndFloats) {
  std::vector<uint8_t> i4;
  for (int32_t v : {1, -2, 0x01020304, -2147483647 - 1}) PutBE(i4, static_cast<uint32_t>(v), 4);
  ArrayInfo info;
  auto ints = Decode<int32_t>(Npy(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (4,), }", i4), &info);
  EXPECT_EQ(ints, (std::vector<int32_t>{1, -2, 0x01020304, -2147483647 - 1}));
  EXPECT_EQ(info.dtype, DType::kI32);
  EXPECT_EQ(info.byte_swapped, std::endian::native == std::endian::little);
  EXPECT_EQ(info.shape, (std::vector<int64_t>{4}));

  std::vector<uint8_t> f8;
  for (double v : {1.5, -0.25, 1e300}) PutBE(f8, std::bit_cast<uint64_t>(v), 8);
  auto doubles = Decode<double>(Npy(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", f8));
  EXPECT_EQ(doubles, (std::vector<double>{1.5, -0.25, 1e300}));

  std::vector<uint8_t> f2;
  for (uint16_t bits : {0x3c00, 0xc000, 0x7bff}) PutBE(f2, bits, 2);  // 1.0, -2.0, 65504 as float16
  auto halves = Decode<uint16_t>(Npy(1, "{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }", f2));
  EXPECT_EQ(halves, (std::vector<uint16_t>{0x3c00, 0xc000, 0x7bff}));
}

TEST(NpyTest, SwapsComplexNumbersPerComponent) {
  std::vector<uint8_t> c8, c16;
  for (float v : {1.0f, 2.0f, -3.0f, 0.5f}) PutBE(c8, std::bit_cast<uint32_t>(v), 4);
  for (double v : {1.0, 2.0}) PutBE(c16, std::bit_cast<uint64_t>(v), 8);
  auto a = Decode<std::complex<float>>(Npy(1, "{'descr': '>c8', 'fortran_order': False, 'shape': (2,), }", c8));
  EXPECT_EQ(a, (std::vector<std::complex<float>>{{1, 2}, {-3, 0.5}}));
  auto b = Decode<std::complex<double>>(Npy(1, "{'descr': '>c16', 'fortran_order': False, 'shape': (), }", c16));
  EXPECT_EQ(b, (std::vector<std::complex<double>>{{1, 2}}));
}

TEST(NpyTest, TransposesFortranOrderIn2DAnd3DWithByteSwap) {
  // 2x3, value at (i, j) = 10 * i + j, stored column-major, little-endian.
  std::vector<uint8_t> f2d;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i) PutLE(f2d, 10 * i + j, 8);
  auto m = Decode<int64_t>(Npy(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", f2d));
  EXPECT_EQ(m, (std::vector<int64_t>{0, 1, 2, 10, 11, 12}));

  // 2x3x4, value at (i, j, k) = 100 i + 10 j + k, column-major, big-endian u16.
  std::vector<uint8_t> f3d;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) PutBE(f3d, 100 * i + 10 * j + k, 2);
  ArrayInfo info;
  auto t = Decode<uint16_t>(Npy(2, "{'descr': '>u2', 'fortran_order': True, 'shape': (2, 3, 4), }", f3d), &info);
  EXPECT_TRUE(info.fortran_order);
  ASSERT_EQ(t.size(), 24u);
  size_t n = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(t[n++], 100 * i + 10 * j + k) << i << j << k;

  // 4D with a unit axis, float32.
  std::vector<uint8_t> f4d;
  for (int l = 0; l < 2; ++l)
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 2; ++i) PutLE(f4d, std::bit_cast<uint32_t>(float(100 * i + 10 * k + l)), 4);
  auto q = Decode<float>(Npy(3, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1, 3, 2), }", f4d));
  ASSERT_EQ(q.size(), 12u);
  n = 0;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      for (int l = 0; l < 2; ++l) EXPECT_EQ(q[n++], float(100 * i + 10 * k + l));
}

TEST(NpyTest, ReadsBoolByteAndNativeOrderDescrs) {
  auto b = Decode<uint8_t>(Npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", {1, 0, 1}));
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 0, 1}));
  ArrayInfo info;
  auto u = Decode<uint8_t>(Npy(1, "{\"descr\": \"|u1\", \"shape\": (1, 2), \"fortran_order\": False}", {7, 9}), &info);
  EXPECT_EQ(u, (std::vector<uint8_t>{7, 9}));
  EXPECT_EQ(info.shape, (std::vector<int64_t>{1, 2}));

  std::vector<uint8_t> native(4);
  uint32_t v = 0xdeadbeef;
  std::memcpy(native.data(), &v, 4);
  auto n = Decode<uint32_t>(Npy(1, "{'descr': '=u4', 'fortran_order': False, 'shape': (1L,), }", native), &info);
  EXPECT_EQ(n, (std::vector<uint32_t>{0xdeadbeef}));
  EXPECT_FALSE(info.byte_swapped);

  auto empty = ParseNpyHeader(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", {}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->nbytes(), 0u);
}

TEST(NpyTest, RejectsUnsupportedDtypesClearly) {
  struct Case {
    std::string descr;
    std::string says;
  };
  for (const Case& c : {Case{"'|O'", "object"}, Case{"[('a', '<i4'), ('b', '<f8')]", "structured"},
                        Case{"'|V8'", "structured"}, Case{"'<U5'", "unsupported dtype"},
                        Case{"'<M8[ns]'", "unsupported dtype"}, Case{"'<f3'", "unsupported dtype"}}) {
    auto r = ParseNpyHeader(Npy(1, "{'descr': " + c.descr + ", 'fortran_order': False, 'shape': (1,), }",
                                std::vector<uint8_t>(64)));
    ASSERT_FALSE(r.ok()) << c.descr;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(NpyTest, RejectsMalformedAndTruncatedFiles) {
  auto truncated = ParseNpyHeader(Npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }",
                                      std::vector<uint8_t>(31)));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("32"), std::string::npos) << truncated.status().message();

  for (std::string dict : {"{'descr': '<f8', 'shape': (1,), }",
                           "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1,)}",
                           "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}",
                           "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "not a dict"}) {
    EXPECT_FALSE(ParseNpyHeader(Npy(1, dict, std::vector<uint8_t>(64))).ok()) << dict;
  }
  std::vector<uint8_t> bad_magic = Npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", {});
  bad_magic[1] = 'X';
  EXPECT_FALSE(ParseNpyHeader(bad_magic).ok());
  std::vector<uint8_t> short_header = Npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", {});
  short_header.resize(20);
  EXPECT_FALSE(ParseNpyHeader(short_header).ok());
}

TEST(NpyTest, EncodesVersion1WithNumpysAlignedHeader) {
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> npy = EncodeNpy(DType::kF32, {2, 3}, {reinterpret_cast<uint8_t*>(values.data()), 24});
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy[6], 1);
  EXPECT_EQ(npy[7], 0);
  const size_t hlen = npy[8] | (npy[9] << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(npy[10 + hlen - 1], '\n');
  std::string header(reinterpret_cast<char*>(npy.data()) + 10, hlen);
  const char* order = std::endian::native == std::endian::little ? "<" : ">";
  EXPECT_EQ(header.substr(0, header.find_last_not_of(" \n") + 1),
            std::string("{'descr': '") + order + "f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(npy.size(), 10 + hlen + 24);
  EXPECT_EQ(Decode<float>(npy), values);

  std::vector<uint8_t> one = EncodeNpy(DType::kBool, {3}, std::vector<uint8_t>{1, 0, 1});
  std::string h1(reinterpret_cast<char*>(one.data()) + 10, 60);
  EXPECT_NE(h1.find("'descr': '|b1'"), std::string::npos) << h1;
  EXPECT_NE(h1.find("'shape': (3,)"), std::string::npos) << h1;
  std::vector<uint8_t> scalar = EncodeNpy(DType::kI64, {}, std::vector<uint8_t>(8, 0));
  EXPECT_NE(std::string(scalar.begin(), scalar.end()).find("'shape': ()"), std::string::npos);
}

TEST(NpyTest, DTypeNamesAreNumpysAndRoundTrip) {
  const std::pair<DType, const char*> names[] = {
      {DType::kBool, "bool"},       {DType::kU8, "uint8"},     {DType::kI8, "int8"},       {DType::kU16, "uint16"},
      {DType::kI16, "int16"},       {DType::kU32, "uint32"},   {DType::kI32, "int32"},     {DType::kU64, "uint64"},
      {DType::kI64, "int64"},       {DType::kF16, "float16"},  {DType::kF32, "float32"},   {DType::kF64, "float64"},
      {DType::kC64, "complex64"},   {DType::kC128, "complex128"}};
  const size_t sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8, 8, 16};
  size_t n = 0;
  for (auto [dtype, name] : names) {
    EXPECT_STREQ(DTypeName(dtype), name);
    auto back = ParseDTypeName(name);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, dtype);
    EXPECT_EQ(DTypeSize(dtype), sizes[n++]) << name;
    // Every dtype survives encode + decode.
    std::vector<uint8_t> data(DTypeSize(dtype) * 3);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
    if (dtype == DType::kBool) data = {1, 0, 1};
    std::vector<uint8_t> npy = EncodeNpy(dtype, {3}, data);
    auto info = ParseNpyHeader(npy);
    ASSERT_TRUE(info.ok()) << name;
    EXPECT_EQ(info->dtype, dtype);
    std::vector<uint8_t> out(info->nbytes());
    ASSERT_TRUE(CopyNpyData(*info, npy, out).ok());
    EXPECT_EQ(out, data) << name;
  }
  EXPECT_FALSE(ParseDTypeName("float128").ok());
}

}  // namespace
}  // namespace stoker
