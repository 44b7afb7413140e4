// tests/cpp/formats/tar_bytes.h — hand-built tar bytes for the format tests.
//
// Headers are laid out field by field from the POSIX/GNU specifications, not
// with TarWriter, so the reader is checked against an independent encoder.
// Thread-safety: free functions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace stoker::testing {

inline constexpr char kPosixMagic[] = "ustar\0" "00";  // 8 bytes with the version
inline constexpr char kGnuMagic[] = "ustar  ";          // "ustar  \0"

inline std::string Octal(uint64_t v, size_t width) {
  std::string s(width - 1, '0');
  for (size_t i = width - 1; i-- > 0; v >>= 3) s[i] = static_cast<char>('0' + (v & 7));
  return s + '\0';
}

// One 512-byte header. `size_field` is written verbatim when non-empty
// (e.g. base-256 bytes), else as octal of `size`.
inline std::string Header(const std::string& name, uint64_t size, char type, const char* magic = kPosixMagic,
                          const std::string& prefix = "", const std::string& size_field = "") {
  std::string h(512, '\0');
  h.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  h.replace(100, 8, Octal(0644, 8));
  h.replace(108, 8, Octal(1000, 8));
  h.replace(116, 8, Octal(1000, 8));
  h.replace(124, 12, size_field.empty() ? Octal(size, 12) : size_field);
  h.replace(136, 12, Octal(1700000000, 12));
  h[156] = type;
  std::memcpy(&h[257], magic, 8);
  h.replace(265, 4, "user");
  h.replace(297, 5, "group");
  if (!prefix.empty()) h.replace(345, prefix.size(), prefix);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  h.replace(148, 7, Octal(sum, 7));  // 6 digits + NUL, then the space stays
  return h;
}

inline std::string Padded(const std::string& data) {
  return data + std::string((512 - data.size() % 512) % 512, '\0');
}

// "LEN key=value\n" with LEN counting the whole record, computed by hand.
inline std::string PaxRecord(const std::string& key, const std::string& value) {
  size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t len = body + 1;
  while (std::to_string(len).size() + body != len) ++len;
  return std::to_string(len) + " " + key + "=" + value + "\n";
}

inline std::string EndBlocks() { return std::string(1024, '\0'); }

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/stoker_" + std::to_string(::getpid()) + "_" + name;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace stoker::testing
