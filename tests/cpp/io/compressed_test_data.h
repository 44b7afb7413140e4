// tests/cpp/io/compressed_test_data.h — what the compressed-reader tests
// (gzip_reader_test, zstd_reader_test) share: compressible test data, a temp
// file, and reads checked against the plain bytes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>

#include "core/file.h"
#include "io/reader.h"

namespace stoker::test_data {

// Compressible but not trivially: words from a small vocabulary, random runs.
inline std::string Text(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  static const char* words[] = {"stoker ", "shard ", "tar ", "deflate ", "\x01\x02\x03", "window ", "frame "};
  std::string s;
  while (s.size() < n) {
    if (rng() % 8 == 0) {
      for (int k = 0; k < 64; ++k) s.push_back(static_cast<char>(rng()));
    } else {
      s += words[rng() % 7];
    }
  }
  s.resize(n);
  return s;
}

inline std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = std::filesystem::temp_directory_path() / name;
  EXPECT_TRUE(WriteWholeFile(path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}).ok());
  return path;
}

inline std::string Read(const RandomAccessReader& r, uint64_t off, size_t n) {
  std::string out(n, '\0');
  Status s = r.PRead(off, {reinterpret_cast<uint8_t*>(out.data()), n});
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// `reads` reads of random offsets and lengths (up to max_len) equal the data.
inline void CheckRandomReads(const RandomAccessReader& r, const std::string& data, int reads, size_t max_len,
                             uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < reads; ++i) {
    const uint64_t off = rng() % data.size();
    const size_t n = std::min<uint64_t>(rng() % max_len + 1, data.size() - off);
    ASSERT_EQ(Read(r, off, n), data.substr(off, n)) << "offset " << off << " length " << n;
  }
}

}  // namespace stoker::test_data
