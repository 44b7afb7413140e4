// core: StreamCopy copies exactly what memcpy copies, at every size around its
// threshold and its vector widths, from and to every alignment, and touches
// nothing outside the destination.
#include "core/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace stoker {
namespace {

TEST(StreamCopyTest, EqualsMemcpyAtEverySizeAndAlignment) {
  std::mt19937 rng(1);
  std::vector<uint8_t> src(kStreamCopyMin * 3 + 512);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<size_t> sizes = {0, 1, 31, 4096, kStreamCopyMin - 1, kStreamCopyMin, kStreamCopyMin + 1,
                               kStreamCopyMin + 127, 2 * kStreamCopyMin + 63, 3 * kStreamCopyMin};
  for (size_t n : sizes) {
    for (size_t src_off : {0, 1, 17, 32}) {
      for (size_t dst_off : {0, 3, 31, 64}) {
        std::vector<uint8_t> dst(n + 256, 0xA5);
        StreamCopy(dst.data() + dst_off, src.data() + src_off, n);
        for (size_t i = 0; i < dst_off; ++i) ASSERT_EQ(dst[i], 0xA5) << n << " " << dst_off;
        ASSERT_TRUE(std::equal(dst.begin() + dst_off, dst.begin() + dst_off + n, src.begin() + src_off))
            << n << " " << src_off << " " << dst_off;
        for (size_t i = dst_off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << n << " " << dst_off;
      }
    }
  }
}

}  // namespace
}  // namespace stoker
