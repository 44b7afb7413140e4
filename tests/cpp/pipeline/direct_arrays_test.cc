// direct_arrays: predictions land where numpy's writers put the array bytes;
// a verified field's slots hold exactly the array; a wrong prediction (an npz
// of the probe's size with its entries reordered) is refused and RestoreDirect
// gives the staging buffer back the file's bytes.
#include "pipeline/direct_arrays.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "formats/npy.h"
#include "formats/zip.h"

namespace stoker {
namespace {

std::vector<uint8_t> Floats(int n, float base) {
  std::vector<uint8_t> out(n * sizeof(float));
  for (int i = 0; i < n; ++i) {
    float v = base + static_cast<float>(i);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof v);
  }
  return out;
}

std::vector<uint8_t> Npz(bool swapped, float base) {
  ZipWriter z;
  const auto a = EncodeNpy(DType::kF32, {4, 8}, Floats(32, base));
  const auto b = EncodeNpy(DType::kF32, {4, 8}, Floats(32, base + 100));
  if (swapped) {
    z.Add("b.npy", b, false);
    z.Add("a.npy", a, false);
  } else {
    z.Add("a.npy", a, false);
    z.Add("b.npy", b, false);
  }
  return z.Finish();
}

// One sample: 512 bytes of something else, the .npy, then the .npz.
struct Sample {
  std::vector<uint8_t> bytes;
  SampleEntry entry;
};

Sample Make(bool swapped, float base) {
  Sample s;
  s.bytes.assign(512, 0x5a);
  const auto npy = EncodeNpy(DType::kF32, {2, 16}, Floats(32, base));
  const auto npz = Npz(swapped, base);
  s.entry.key = "k";
  s.entry.begin = 1000;
  s.entry.members.push_back({"x.npy", "k.x.npy", 1000 + s.bytes.size(), npy.size()});
  s.bytes.insert(s.bytes.end(), npy.begin(), npy.end());
  s.entry.members.push_back({"y.npz", "k.y.npz", 1000 + s.bytes.size(), npz.size()});
  s.bytes.insert(s.bytes.end(), npz.begin(), npz.end());
  s.entry.end = 1000 + s.bytes.size();
  return s;
}

// What a detoured read leaves: the ranges in their slots, garbage in staging there.
std::vector<uint8_t> ReadDetoured(const Sample& s, const BatchLayout& layout, const std::vector<DirectRange>& ranges,
                                  uint8_t* buffer, int slot) {
  std::vector<uint8_t> staging = s.bytes;
  for (const DirectRange& r : ranges) {
    const ArraySlot& a = layout.arrays[r.array];
    std::memcpy(buffer + a.offset + a.sample_bytes * slot, s.bytes.data() + r.offset, r.size);
    std::memset(staging.data() + r.offset, 0xee, r.size);
  }
  return staging;
}

TEST(DirectArraysTest, PredictedRangesVerifyAndHoldTheArrays) {
  const Sample probe = Make(false, 0);
  auto layout = MakeBatchLayout({NpyField("x.npy"), NpzField("y.npz")}, 2, probe.entry, probe.bytes, "probe");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->fields[1].probe_data_offsets.size(), 2u);

  const Sample s = Make(false, 7);
  std::vector<DirectRange> ranges;
  PredictDirect(*layout, s.entry, &ranges);
  ASSERT_EQ(ranges.size(), 3u);  // x, and both npz arrays
  std::vector<uint8_t> buffer(layout->buffer_bytes, 0);
  std::vector<uint8_t> staging = ReadDetoured(s, *layout, ranges, buffer.data(), 1);
  for (size_t f = 0; f < 2; ++f) {
    const MemberRef& m = s.entry.members[f];
    std::vector<DirectRange> mine;
    for (const DirectRange& r : ranges)
      if (r.field == f) mine.push_back(r);
    std::span<const uint8_t> member(staging.data() + (m.offset - s.entry.begin), m.size);
    EXPECT_TRUE(VerifyDirect(*layout, layout->fields[f], member, m.offset - s.entry.begin, mine, buffer.data(), 1));
  }
  const ArraySlot& x = layout->arrays[layout->fields[0].arrays[0]];
  EXPECT_EQ(std::memcmp(buffer.data() + x.offset + x.sample_bytes, Floats(32, 7).data(), x.sample_bytes), 0);
  const ArraySlot& b = layout->arrays[layout->fields[1].arrays[1]];
  EXPECT_EQ(b.name, "y.npz/b");
  EXPECT_EQ(std::memcmp(buffer.data() + b.offset + b.sample_bytes, Floats(32, 107).data(), b.sample_bytes), 0);
}

TEST(DirectArraysTest, ReorderedNpzOfTheSameSizeIsRefusedAndRestored) {
  const Sample probe = Make(false, 0);
  auto layout = MakeBatchLayout({NpyField("x.npy"), NpzField("y.npz")}, 2, probe.entry, probe.bytes, "probe");
  ASSERT_TRUE(layout.ok());
  const Sample s = Make(true, 3);
  ASSERT_EQ(s.entry.members[1].size, probe.entry.members[1].size);  // the prediction fires
  std::vector<DirectRange> ranges;
  PredictDirect(*layout, s.entry, &ranges);
  std::vector<uint8_t> buffer(layout->buffer_bytes, 0);
  std::vector<uint8_t> staging = ReadDetoured(s, *layout, ranges, buffer.data(), 0);
  std::vector<DirectRange> npz;
  for (const DirectRange& r : ranges)
    if (r.field == 1) npz.push_back(r);
  const MemberRef& m = s.entry.members[1];
  std::span<const uint8_t> member(staging.data() + (m.offset - s.entry.begin), m.size);
  EXPECT_FALSE(VerifyDirect(*layout, layout->fields[1], member, m.offset - s.entry.begin, npz, buffer.data(), 0));
  RestoreDirect(*layout, npz, buffer.data(), 0, staging);
  std::vector<DirectRange> npy;
  for (const DirectRange& r : ranges)
    if (r.field == 0) npy.push_back(r);
  RestoreDirect(*layout, npy, buffer.data(), 0, staging);
  EXPECT_EQ(staging, s.bytes);
}

TEST(DirectArraysTest, NoPredictionForDeflatedNpzOrInlineMembers) {
  Sample probe = Make(false, 0);
  ZipWriter z;
  z.Add("a.npy", EncodeNpy(DType::kF32, {4, 8}, Floats(32, 0)), true);
  const auto deflated = z.Finish();
  probe.bytes.resize(probe.entry.members[1].offset - probe.entry.begin);
  probe.entry.members[1].size = deflated.size();
  probe.bytes.insert(probe.bytes.end(), deflated.begin(), deflated.end());
  probe.entry.end = probe.entry.begin + probe.bytes.size();
  auto layout = MakeBatchLayout({NpyField("x.npy"), NpzField("y.npz")}, 2, probe.entry, probe.bytes, "probe");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(layout->fields[1].probe_data_offsets.empty());
  std::vector<DirectRange> ranges;
  PredictDirect(*layout, probe.entry, &ranges);
  ASSERT_EQ(ranges.size(), 1u);  // the .npy only
  probe.entry.members[0].inline_data = "x";
  PredictDirect(*layout, probe.entry, &ranges);
  EXPECT_TRUE(ranges.empty());
}

}  // namespace
}  // namespace stoker
